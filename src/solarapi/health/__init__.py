"""`GET|HEAD /health`: liveness for load balancers, never rate limited."""

"""`GET|HEAD /health` (readiness: the database answers) and `/health/live` (liveness: the
process answers), for load balancers and orchestrators; never rate limited."""

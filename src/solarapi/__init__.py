"""Solar Energy Platform API."""

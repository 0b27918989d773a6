"""API keys, the authenticated principal and the plan scope table."""

"""Systems."""

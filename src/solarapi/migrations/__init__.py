"""Alembic migrations, shipped in the package so `solarapi migrate` works anywhere."""

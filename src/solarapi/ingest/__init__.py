"""Ingest tokens: per-system upload credentials for data loggers (contract section 14)."""

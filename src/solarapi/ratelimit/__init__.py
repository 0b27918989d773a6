"""Clock-aligned per-key and per-IP windows, in memory or in Redis, behind one interface."""

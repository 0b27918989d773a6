"""Small shared pieces: ids, time, pagination, JSON, plans."""

"""The change feed, `GET /readings/changes`: the stored quarter-hours of an environment that
were inserted or replaced after a cursor, in commit order (docs/changes.md)."""

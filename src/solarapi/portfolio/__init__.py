"""Portfolio reads (`/portfolio/readings`, `/summary`, `/market-value`): a whole fleet, or a
filtered part of it, in one request, every number computed by the per-system endpoint's own
code path (docs/portfolio.md)."""

"""Alerts: rules that watch every metered system (offline, zero production in daylight,
underperforming), the alerts they open and resolve, and their events."""

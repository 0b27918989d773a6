"""Solar Energy Platform API."""

from solarapi.kit.tzdb import use_shipped_database

# Before any module of the service builds a ZoneInfo: local calendars follow the tz database
# pinned in uv.lock, never the host's (kit/tzdb.py).
use_shipped_database()

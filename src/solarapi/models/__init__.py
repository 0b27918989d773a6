"""SQLAlchemy tables, one module per area. Importing this package registers them all."""

from solarapi.models import (  # noqa: F401 - imported to register their tables
    alerts,
    audit,
    dashboard,
    declarations,
    ingest,
    irradiance,
    jobs,
    prices,
    readings,
    reports,
    systems,
    webhooks,
)
from solarapi.models.account import Account, ApiKey, User
from solarapi.models.base import Base

__all__ = ["Account", "ApiKey", "Base", "User"]

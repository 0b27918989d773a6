"""Official Python client for the Solar Energy Platform API (v1).

from solarapi_client import Client

with Client(api_key="pk_live_…", base_url="https://solar.example.com") as client:
    for system in client.systems.list():
        print(system.name, client.systems.summary(system.id).energy_today_wh)

A data logger uploads its system's readings with an ingest token instead:

with IngestClient(token="ik_…", base_url="https://solar.example.com") as logger:
    logger.upload([{"timestamp": "2025-06-15T10:15:00Z", "energy_wh": 1520.5}])
"""

from solarapi_client._async import AsyncClient, AsyncIngestClient
from solarapi_client._core import NOT_GIVEN, Page, RetryPolicy, RetryWait, __version__
from solarapi_client._sync import Client, IngestClient
from solarapi_client.errors import (
    ApiError,
    AuthenticationError,
    ConflictError,
    ConnectionError,
    InternalServerError,
    MethodNotAllowedError,
    NotFoundError,
    PayloadTooLargeError,
    PermissionDeniedError,
    RateLimitError,
    RequestTimeoutError,
    ServiceUnavailableError,
    SolarApiError,
    TimeoutError,
    UnsupportedMediaTypeError,
    ValidationError,
    WebhookVerificationError,
)
from solarapi_client.pagination import AsyncPager, SyncPager
from solarapi_client.webhooks import verify_webhook

__all__ = [
    "NOT_GIVEN",
    "ApiError",
    "AsyncClient",
    "AsyncIngestClient",
    "AsyncPager",
    "AuthenticationError",
    "Client",
    "ConflictError",
    "ConnectionError",
    "IngestClient",
    "InternalServerError",
    "MethodNotAllowedError",
    "NotFoundError",
    "Page",
    "PayloadTooLargeError",
    "PermissionDeniedError",
    "RateLimitError",
    "RequestTimeoutError",
    "RetryPolicy",
    "RetryWait",
    "ServiceUnavailableError",
    "SolarApiError",
    "SyncPager",
    "TimeoutError",
    "UnsupportedMediaTypeError",
    "ValidationError",
    "WebhookVerificationError",
    "__version__",
    "verify_webhook",
]

"""Official Python client for the Solar Energy Platform API (v1).

from solarapi_client import Client

with Client(api_key="pk_live_…", base_url="https://solar.example.com") as client:
    for system in client.systems.list():
        print(system.name, client.systems.summary(system.id).energy_today_wh)
"""

from solarapi_client._async import AsyncClient
from solarapi_client._core import NOT_GIVEN, Page, RetryPolicy, RetryWait, __version__
from solarapi_client._sync import Client
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
    "AsyncPager",
    "AuthenticationError",
    "Client",
    "ConflictError",
    "ConnectionError",
    "InternalServerError",
    "MethodNotAllowedError",
    "NotFoundError",
    "Page",
    "PayloadTooLargeError",
    "PermissionDeniedError",
    "RateLimitError",
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

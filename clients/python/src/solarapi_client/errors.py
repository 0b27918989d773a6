"""Exceptions. Every error answer of the API becomes an `ApiError` subclass chosen by its
`code`; failures to reach the API at all are `ConnectionError`/`TimeoutError`."""

from __future__ import annotations

from typing import Any

import httpx


class SolarApiError(Exception):
    """Base class of everything this client raises."""


class ApiError(SolarApiError):
    """The API answered with an error: `{"error": message, "code": code}`."""

    def __init__(
        self,
        message: str,
        *,
        code: str,
        status: int,
        request_id: str | None,
        headers: httpx.Headers | None = None,
        body: Any = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.code = code
        self.status = status
        self.request_id = request_id
        self.headers = headers if headers is not None else httpx.Headers()
        self.body = body

    def __str__(self) -> str:
        suffix = f", request {self.request_id}" if self.request_id else ""
        return f"{self.message} ({self.status} {self.code}{suffix})"

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(message={self.message!r}, code={self.code!r}, "
            f"status={self.status}, request_id={self.request_id!r})"
        )


class ValidationError(ApiError):
    """400 `validation`: a parameter, body field or header the API refuses."""


class AuthenticationError(ApiError):
    """401 `unauthorized`: missing, malformed, unknown or revoked key."""


class PermissionDeniedError(ApiError):
    """403 `forbidden`: the account's plan does not cover the operation."""


class NotFoundError(ApiError):
    """404 `not_found`: unknown path or id, or another account's or environment's object."""


class MethodNotAllowedError(ApiError):
    """405 `method_not_allowed`."""


class ConflictError(ApiError):
    """409 `conflict`: a state transition not allowed, an overlap, an Idempotency-Key reused."""


class PayloadTooLargeError(ApiError):
    """413 `payload_too_large`."""


class UnsupportedMediaTypeError(ApiError):
    """415 `unsupported_media_type`."""


class RateLimitError(ApiError):
    """429 `rate_limit`, raised once retries are used up or the wait would be too long.
    `retry_after` is the number of seconds the API asked to wait."""

    @property
    def retry_after(self) -> float | None:
        value = self.headers.get("retry-after")
        try:
            return float(value) if value is not None else None
        except ValueError:
            return None


class RequestTimeoutError(ApiError):
    """408 `request_timeout`: the server closed a connection whose request arrived too
    slowly (its head not complete within 10 s, or its body slower than 240 bytes a second)."""


class InternalServerError(ApiError):
    """500 `server_error` (the request id is in the server's logs)."""


class ServiceUnavailableError(ApiError):
    """503 `unavailable`: the API's database cannot be reached; retried automatically."""


class ConnectionError(SolarApiError):
    """The API could not be reached, or the connection broke before an answer."""


class TimeoutError(SolarApiError):
    """No answer within the configured timeout."""


class WebhookVerificationError(SolarApiError):
    """A webhook delivery whose signature, timestamp or headers do not verify."""


ERRORS_BY_CODE: dict[str, type[ApiError]] = {
    "validation": ValidationError,
    "unauthorized": AuthenticationError,
    "forbidden": PermissionDeniedError,
    "not_found": NotFoundError,
    "method_not_allowed": MethodNotAllowedError,
    "conflict": ConflictError,
    "payload_too_large": PayloadTooLargeError,
    "unsupported_media_type": UnsupportedMediaTypeError,
    "rate_limit": RateLimitError,
    "request_timeout": RequestTimeoutError,
    "server_error": InternalServerError,
    "unavailable": ServiceUnavailableError,
}

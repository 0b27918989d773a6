"""docs/api.md, the users' API reference, against the application's own OpenAPI document, and
the repository's docs against references to files a clone does not have."""

from __future__ import annotations

import re
from pathlib import Path

from solarapi.app import create_app
from solarapi.config import Settings
from solarapi.openapi import build_openapi
from tests.support import ROOT, TEST_SECRET

REFERENCE = (ROOT / "docs" / "api.md").read_text()


def _normal(path: str) -> str:
    return re.sub(r"\{[^}]+\}", "{}", path.removeprefix("/api/v1"))


def _documented_operations() -> set[tuple[str, str]]:
    """(METHOD, path) pairs: table rows `| GET | `/systems` |` and inline `GET /api/v1/…`."""
    rows = re.findall(r"^\| (GET|POST|PATCH|DELETE) \| `(/[^`?]+)`", REFERENCE, re.MULTILINE)
    inline = re.findall(r"`(GET|POST|PATCH|DELETE) (/[^`?\s]+)", REFERENCE)
    return {(method, _normal(path)) for method, path in [*rows, *inline]}


def test_every_operation_of_the_openapi_document_is_in_the_reference(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path, secret_key=TEST_SECRET)
    document = build_openapi(create_app(settings, run_jobs=False))
    operations = {
        (method.upper(), _normal(path))
        for path, item in document["paths"].items()
        for method in item
        if method != "head"
    }
    assert len(operations) >= 33
    assert operations - _documented_operations() == set()
    codes = document["components"]["schemas"]["Error"]["properties"]["code"]["enum"]
    table = set(re.findall(r"^\| `([a-z_]+)` \| \d{3} \|", REFERENCE, re.MULTILINE))
    assert table == set(codes)


def test_the_docs_refer_to_nothing_outside_the_repository() -> None:
    texts = [ROOT / "README.md", ROOT / "CHANGELOG.md", ROOT / "clients" / "python" / "README.md"]
    texts += [*(ROOT / "docs").glob("*.md"), *(ROOT / "bench").rglob("*.md")]
    for path in texts:
        text = path.read_text()
        assert "shared/spec" not in text, path
        assert "api-v1.md" not in text, path
        for target in re.findall(r"\]\(([^)#:]+)(?:#[^)]*)?\)", text):
            assert (path.parent / target).exists(), f"{path}: link to {target}"


def test_the_reference_says_which_answers_carry_no_request_id_or_rate_limit_headers() -> None:
    """`solarapi serve` answers a few requests itself, before the API runs (server.py): a URL
    or header lines over their limits and malformed HTTP (400), a stalled head or body (408),
    too many connections (429, 503). Those answers have neither `X-Request-Id` nor rate-limit
    headers, so the reference's "every response carries …" must name them as the exception."""
    conventions = REFERENCE.split("## Conventions", 1)[1].split("\n## ", 1)[0]
    rate_limits = REFERENCE.split("## Rate limits", 1)[1].split("\n## ", 1)[0]
    assert "Every response carries `X-Request-Id`" in conventions
    exception = conventions.split("Every response carries `X-Request-Id`", 1)[1]
    exception = exception.split("\n- ", 1)[0]
    defaults = Settings()
    limits = (f"{defaults.max_url_bytes // 1024} KiB", f"{defaults.max_header_bytes // 1024} KiB")
    for words in (*limits, "malformed HTTP", "408", "no request id", "rate-limit"):
        assert words in exception, words
    assert "Headers on every response" in rate_limits
    assert "#conventions" in rate_limits.split("Headers on every response", 1)[1].split("\n", 1)[0]

"""Report files on S3-compatible object storage (`SOLARAPI_REPORTS_URL=s3://…`), against a
real S3 server: moto in server mode, started here as its own process on a free port."""

from __future__ import annotations

import base64
import hashlib
import os
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import boto3
import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy import update

from solarapi.config import Settings
from solarapi.kit.plans import Plan
from solarapi.kit.timefmt import utcnow
from solarapi.models.reports import Report
from solarapi.reports import jobs as report_jobs
from solarapi.reports.storage import CHUNK_BYTES, S3ReportStorage, storage_for
from tests.reports.helpers import JUNE_1, completed, create_report, make_system, upload_readings
from tests.support import client_for, free_port, make_tenant, running_app

PERIOD = {"from": "2025-06-01T00:00:00Z", "to": "2025-06-02T00:00:00Z"}
AWS_ENV = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
}


@dataclass(frozen=True)
class S3Server:
    endpoint: str
    log: Path

    def client(self) -> Any:
        return boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            region_name="us-east-1",
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
        )

    def keys(self, bucket: str) -> list[str]:
        listed = self.client().list_objects_v2(Bucket=bucket)
        return sorted(item["Key"] for item in listed.get("Contents", []))


@pytest.fixture(scope="session")
def s3_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3Server]:
    port = free_port()
    log = tmp_path_factory.mktemp("moto") / "moto.log"
    with log.open("wb") as out, pytest.MonkeyPatch.context() as patch:
        for name, value in AWS_ENV.items():
            patch.setenv(name, value)
        proc = subprocess.Popen(
            [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
            stdout=out,
            stderr=subprocess.STDOUT,
            env={**os.environ, **AWS_ENV},
        )
        server = S3Server(f"http://127.0.0.1:{port}", log)
        try:
            deadline = time.monotonic() + 60
            while True:
                if proc.poll() is not None:
                    pytest.fail(f"moto server exited:\n{log.read_text(errors='replace')}")
                try:
                    httpx.get(f"{server.endpoint}/moto-api/", timeout=1)
                    break
                except httpx.HTTPError:
                    if time.monotonic() > deadline:
                        pytest.fail(f"moto did not start:\n{log.read_text(errors='replace')}")
                    time.sleep(0.1)
            yield server
        finally:
            proc.terminate()
            proc.wait(10)


@pytest.fixture
def server_log(s3_server: S3Server) -> Iterator[None]:
    """The S3 server's log lines of this test, printed (pytest shows them when it fails)."""
    size = s3_server.log.stat().st_size
    yield
    with s3_server.log.open("rb") as handle:
        handle.seek(size)
        print(f"--- S3 server log ---\n{handle.read().decode(errors='replace')}")


@pytest.fixture
async def s3_app(
    settings: Settings, s3_server: S3Server, server_log: None, tmp_path: Path
) -> AsyncIterator[tuple[FastAPI, str]]:
    """The app on this run's database with its reports in a fresh bucket, under a prefix."""
    bucket = f"reports-{uuid.uuid4().hex[:12]}"
    s3_server.client().create_bucket(Bucket=bucket)
    staging = tmp_path / "s3-staging"
    staging.mkdir()
    s3_settings = settings.model_copy(
        update={
            "reports_url": f"s3://{bucket}/solar/reports",
            "reports_s3_endpoint_url": s3_server.endpoint,
            # Under the test's own directory: pytest removes it (a mkdtemp was left in /tmp).
            "reports_dir": staging,
        }
    )
    async with running_app(s3_settings) as application:
        yield application, bucket


async def report_of(app: FastAPI, client: httpx.AsyncClient, fmt: str) -> dict[str, Any]:
    system = await make_system(client, "Roof", "Europe/Amsterdam", market_zone="NL")
    await upload_readings(client, system, JUNE_1, 96)
    report = await create_report(client, type="production", format=fmt, **PERIOD)
    return await completed(client, app, report["id"])


async def file_name(app: FastAPI, report_id: str) -> str:
    async with app.state.sessionmaker() as session:
        stored = await session.get(Report, report_id)
        assert stored is not None
        assert stored.file_name is not None
        return stored.file_name


@pytest.mark.parametrize("fmt", ["csv", "pdf"])
async def test_report_is_stored_in_the_bucket_and_downloaded_through_the_api(
    s3_app: tuple[FastAPI, str], s3_server: S3Server, fmt: str
) -> None:
    app, bucket = s3_app
    tenant = await make_tenant(app, Plan.ENTERPRISE)
    async with client_for(app, tenant.live) as client:
        done = await report_of(app, client, fmt)
        download = await client.get(done["download_url"])
        # Without compression the length is known up front (gzip makes it chunked).
        plain = await client.get(done["download_url"], headers={"Accept-Encoding": "identity"})
    name = await file_name(app, done["id"])
    stored = s3_server.client().get_object(Bucket=bucket, Key=f"solar/reports/{name}")
    body = stored["Body"].read()
    assert download.status_code == 200, download.text
    assert download.content == body
    assert hashlib.sha256(body).hexdigest() == done["file"]["sha256"]
    assert len(body) == done["file"]["size_bytes"]
    assert plain.content == body
    assert plain.headers["content-length"] == str(len(body))
    assert download.headers["content-type"].startswith(done["file"]["content_type"])
    assert stored["ContentType"] == done["file"]["content_type"]
    assert download.headers["content-disposition"] == (
        f'attachment; filename="production_2025-06-01_2025-06-02_{done["id"]}.{fmt}"'
    )
    digest = base64.b64encode(hashlib.sha256(body).digest()).decode()
    assert download.headers["repr-digest"] == f"sha-256=:{digest}:"
    # Nothing is left on local disk: the staging copy went once it was uploaded.
    assert list(app.state.settings.effective_reports_dir.iterdir()) == []


async def test_delete_removes_the_object(s3_app: tuple[FastAPI, str], s3_server: S3Server) -> None:
    app, bucket = s3_app
    tenant = await make_tenant(app, Plan.ENTERPRISE)
    async with client_for(app, tenant.live) as client:
        done = await report_of(app, client, "csv")
        name = await file_name(app, done["id"])
        assert s3_server.keys(bucket) == [f"solar/reports/{name}"]
        deleted = await client.delete(f"/api/v1/reports/{done['id']}")
    assert deleted.status_code == 204
    assert s3_server.keys(bucket) == []


async def test_expiry_deletes_the_object_and_the_download_is_404(
    s3_app: tuple[FastAPI, str], s3_server: S3Server
) -> None:
    app, bucket = s3_app
    tenant = await make_tenant(app, Plan.ENTERPRISE)
    async with client_for(app, tenant.live) as client:
        done = await report_of(app, client, "csv")
        async with app.state.sessionmaker() as session, session.begin():
            await session.execute(
                update(Report)
                .where(Report.id == done["id"])
                .values(
                    completed_at=utcnow() - timedelta(days=7, seconds=5),
                    expires_at=utcnow() - timedelta(seconds=5),
                )
            )
        assert len(s3_server.keys(bucket)) == 1
        removed = await report_jobs.remove_expired_files(app.state.sessionmaker, utcnow())
        after = await client.get(f"/api/v1/reports/{done['id']}/download")
    assert removed >= 1
    assert s3_server.keys(bucket) == []
    assert after.status_code == 404
    assert after.json()["code"] == "not_found"
    assert "expired" in after.json()["error"]


async def test_a_missing_object_is_404_not_500(
    s3_app: tuple[FastAPI, str], s3_server: S3Server
) -> None:
    app, bucket = s3_app
    tenant = await make_tenant(app, Plan.ENTERPRISE)
    async with client_for(app, tenant.live) as client:
        done = await report_of(app, client, "csv")
        name = await file_name(app, done["id"])
        s3_server.client().delete_object(Bucket=bucket, Key=f"solar/reports/{name}")
        download = await client.get(done["download_url"])
    assert download.status_code == 404
    assert download.json()["code"] == "not_found"


async def test_orphan_sweep_removes_unreferenced_objects_only(
    s3_app: tuple[FastAPI, str], s3_server: S3Server
) -> None:
    app, bucket = s3_app
    tenant = await make_tenant(app, Plan.ENTERPRISE)
    async with client_for(app, tenant.live) as client:
        done = await report_of(app, client, "csv")
    kept = await file_name(app, done["id"])
    s3 = s3_server.client()
    orphan = f"{done['id']}-0.csv"  # as left by an attempt whose transaction then failed
    s3.put_object(Bucket=bucket, Key=f"solar/reports/{orphan}", Body=b"x")
    s3.put_object(Bucket=bucket, Key="solar/reports/notes.txt", Body=b"not ours")
    staging = app.state.settings.effective_reports_dir / f".{done['id']}-9.pdf.partial"
    staging.write_bytes(b"x")
    # Objects' LastModified cannot be set back, so the sweep looks from two days ahead.
    removed = await report_jobs.remove_orphan_files(
        app.state.sessionmaker, utcnow() + timedelta(days=2)
    )
    assert removed >= 2
    assert s3_server.keys(bucket) == sorted([f"solar/reports/{kept}", "solar/reports/notes.txt"])
    assert not staging.exists()


async def test_downloads_stream_in_chunks(s3_app: tuple[FastAPI, str], tmp_path: Path) -> None:
    app, _ = s3_app
    storage = storage_for(app.state.settings)
    assert isinstance(storage, S3ReportStorage)
    data = os.urandom(3 * CHUNK_BYTES + 17)
    source = tmp_path / "rpt_streamtest-1.csv"
    source.write_bytes(data)
    await storage.save(source.name, source, "text/csv")
    assert not source.exists()  # uploaded, then the local copy removed
    opened = await storage.open(source.name)
    assert opened is not None
    chunks = [chunk async for chunk in opened.chunks]
    assert opened.size == len(data)
    assert b"".join(chunks) == data
    assert len(chunks) >= 4
    assert max(len(chunk) for chunk in chunks) <= CHUNK_BYTES
    await storage.delete(source.name)
    assert await storage.open(source.name) is None
    await storage.delete(source.name)  # deleting a missing object is not an error


def test_reports_url_must_name_a_bucket() -> None:
    for bad in ("s3://", "https://bucket/prefix", "bucket/prefix"):
        with pytest.raises(ValueError, match="SOLARAPI_REPORTS_URL must be s3://bucket"):
            Settings(reports_url=bad)
    assert Settings(reports_url="  ").reports_url is None

"""Where finished report files are kept: local disk (the default) or S3-compatible object
storage (`SOLARAPI_REPORTS_URL=s3://bucket/prefix`), so several hosts can serve them.

One small interface with two implementations, chosen once from the settings by
`storage_for`. A file is always rendered on local disk first (into `staging_dir`) and then
handed to `save`; the local store keeps it where it is, the S3 store uploads it and removes
the local copy. Reads stream in chunks: a download never holds the whole file in memory.
Every S3 call is blocking (boto3), so it runs in a thread, off the event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import threading
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO, Protocol

from solarapi.config import Settings

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

CHUNK_BYTES = 256 * 1024
# Names of the files this service writes: `<report id>-<attempt>.<ext>`, and the temporary
# `.<name>.partial` while rendering.
_OWN_PREFIXES = ("rpt_", ".rpt_")


@dataclass(frozen=True, slots=True)
class StoredFile:
    """An opened report file: its size and its content as chunks. Iterating `chunks` to the
    end (or closing it) releases the file or the connection."""

    size: int
    chunks: AsyncIterator[bytes]


class ReportStorage(Protocol):
    @property
    def staging_dir(self) -> Path:
        """Local directory the renderer writes into before `save`."""

    @property
    def location(self) -> str:
        """Where files are kept, for logs and errors (no credentials)."""

    async def save(self, name: str, source: Path, content_type: str) -> None:
        """Keep the finished file `source` (in `staging_dir`) under `name`."""

    async def open(self, name: str) -> StoredFile | None:
        """The file stored under `name`, or None when there is none."""

    async def delete(self, name: str) -> None:
        """Remove `name`; removing a missing file is not an error."""

    async def names_older_than(self, cutoff: datetime) -> list[str]:
        """Names of this service's files last written before `cutoff` (for the orphan sweep)."""

    async def sweep_staging(self, cutoff: datetime) -> int:
        """Remove staging leftovers older than `cutoff` that `names_older_than` does not see;
        returns how many."""


async def _read_chunks(handle: BinaryIO) -> AsyncIterator[bytes]:
    try:
        while chunk := await asyncio.to_thread(handle.read, CHUNK_BYTES):
            yield chunk
    finally:
        handle.close()


class LocalReportStorage:
    """Files in one directory (`SOLARAPI_REPORTS_DIR`); rendering writes them in place."""

    def __init__(self, directory: Path) -> None:
        self._directory = directory

    @property
    def staging_dir(self) -> Path:
        return self._directory

    @property
    def location(self) -> str:
        return str(self._directory)

    async def save(self, name: str, source: Path, content_type: str) -> None:
        target = self._directory / name
        if source != target:
            os.replace(source, target)

    async def open(self, name: str) -> StoredFile | None:
        path = self._directory / name
        try:
            handle = path.open("rb")
        except FileNotFoundError:
            return None
        return StoredFile(os.fstat(handle.fileno()).st_size, _read_chunks(handle))

    async def delete(self, name: str) -> None:
        (self._directory / name).unlink(missing_ok=True)

    async def names_older_than(self, cutoff: datetime) -> list[str]:
        if not self._directory.is_dir():
            return []
        limit = cutoff.timestamp()
        return [
            entry.name
            for entry in self._directory.iterdir()
            if entry.is_file() and entry.name.startswith(_OWN_PREFIXES)
            and entry.stat().st_mtime < limit
        ]  # fmt: skip

    async def sweep_staging(self, cutoff: datetime) -> int:
        return 0  # the staging directory is the store: `names_older_than` sees everything


class S3ReportStorage:
    """Objects `<prefix>/<name>` in one bucket of S3 or an S3-compatible server."""

    def __init__(self, url: str, endpoint_url: str | None, staging_dir: Path) -> None:
        bucket, _, prefix = url[len("s3://") :].partition("/")
        self._bucket = bucket
        self._prefix = prefix.strip("/")
        self._endpoint_url = endpoint_url
        self._staging_dir = staging_dir
        self._client: S3Client | None = None
        self._client_lock = threading.Lock()

    @property
    def staging_dir(self) -> Path:
        return self._staging_dir

    @property
    def location(self) -> str:
        where = f"s3://{self._bucket}/{self._prefix}".rstrip("/")
        return f"{where} at {self._endpoint_url}" if self._endpoint_url else where

    def _key(self, name: str) -> str:
        return f"{self._prefix}/{name}" if self._prefix else name

    def _s3(self) -> S3Client:
        """The boto3 client, made on first use (in a worker thread: it takes ~0.3 s)."""
        with self._client_lock:
            if self._client is None:
                # boto3 + botocore take ~0.3 s to import (measured with -X importtime) and
                # only deployments with SOLARAPI_REPORTS_URL need them.
                import boto3
                from botocore.config import Config

                options: dict[str, Any] = {"retries": {"max_attempts": 4, "mode": "standard"}}
                region = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
                if self._endpoint_url:
                    # MinIO, Ceph and moto all answer path-style requests; virtual-host
                    # style would need a DNS name per bucket.
                    options["s3"] = {"addressing_style": "path"}
                    region = region or "us-east-1"
                self._client = boto3.session.Session().client(
                    "s3",
                    endpoint_url=self._endpoint_url,
                    region_name=region,
                    config=Config(**options),
                )
            return self._client

    async def save(self, name: str, source: Path, content_type: str) -> None:
        def upload() -> None:
            # upload_file sends large files in parts and retries them.
            self._s3().upload_file(
                str(source), self._bucket, self._key(name), ExtraArgs={"ContentType": content_type}
            )
            source.unlink(missing_ok=True)

        await asyncio.to_thread(upload)

    async def open(self, name: str) -> StoredFile | None:
        def get() -> Any:
            # start-up: botocore, as boto3 above (~0.3 s), only for S3 storage.
            from botocore.exceptions import ClientError

            try:
                return self._s3().get_object(Bucket=self._bucket, Key=self._key(name))
            except ClientError as exc:
                if exc.response.get("Error", {}).get("Code") in ("NoSuchKey", "404"):
                    return None
                raise

        found = await asyncio.to_thread(get)
        if found is None:
            return None
        return StoredFile(int(found["ContentLength"]), _read_chunks(found["Body"]))

    async def delete(self, name: str) -> None:
        await asyncio.to_thread(
            lambda: self._s3().delete_object(Bucket=self._bucket, Key=self._key(name))
        )

    async def names_older_than(self, cutoff: datetime) -> list[str]:
        def listing() -> list[str]:
            start = f"{self._prefix}/" if self._prefix else ""
            names: list[str] = []
            pages = (
                self._s3()
                .get_paginator("list_objects_v2")
                .paginate(Bucket=self._bucket, Prefix=start)
            )
            for page in pages:
                for item in page.get("Contents", []):
                    name = item["Key"][len(start) :]
                    if "/" in name or not name.startswith(_OWN_PREFIXES):
                        continue
                    if item["LastModified"].astimezone(UTC) < cutoff:
                        names.append(name)
            return names

        return await asyncio.to_thread(listing)

    async def sweep_staging(self, cutoff: datetime) -> int:
        # Anything left here is from an attempt that died before or during its upload.
        local = LocalReportStorage(self._staging_dir)
        removed = 0
        for name in await local.names_older_than(cutoff):
            with contextlib.suppress(FileNotFoundError):
                (self._staging_dir / name).unlink()
                removed += 1
        return removed


def storage_for(settings: Settings) -> ReportStorage:
    """The storage the settings name: the same object for the same settings, so the S3 client
    (and its connection pool) is made once per process."""
    return _storage(
        settings.reports_url,
        settings.reports_s3_endpoint_url or None,
        settings.effective_reports_dir,
    )


@functools.lru_cache(maxsize=16)
def _storage(url: str | None, endpoint_url: str | None, directory: Path) -> ReportStorage:
    if url is None:
        return LocalReportStorage(directory)
    return S3ReportStorage(url, endpoint_url, directory)

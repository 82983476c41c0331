"""Export as a download, import of a coffer export as an upload.

The upload is base64 inside a JSON body: the request guard takes only JSON bodies (a web page of
another origin cannot send one without a CORS preflight), and a zip cannot travel as JSON text.
Only coffer exports are uploaded; the other sources are folders on the user's machine, read by
``coffer import``. The DTOs live here, beside the only routes that use them.
"""

from __future__ import annotations

import base64
import binascii
import os
import tempfile
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import IO, Annotated, Any, Literal

from fastapi import APIRouter, Query
from fastapi.responses import StreamingResponse
from pydantic import BaseModel, ConfigDict, Field

from coffer_memory import ImportEntry, ImportReport, InvalidImport, InvalidInput

from ..deps import Service
from ..errors import error_responses

router = APIRouter(tags=["import-export"])
# About 48 MiB of archive; larger homes are exported and imported with the CLI.
MAX_UPLOAD_CHARS = 64 * 1024 * 1024
MAX_UPLOAD_BODY_BYTES = MAX_UPLOAD_CHARS + 64 * 1024
"""The import's body: the base64 text and room for the other fields (the request guard bounds it)."""
IMPORT_PATH = "/api/v1/import"
UPLOAD_FIELD = "content_base64"
_CHUNK = 64 * 1024
_MEDIA = {"zip": "application/zip", "jsonl": "application/x-ndjson"}


class ImportIn(BaseModel):
    """A coffer export (zip or JSONL), base64-encoded, and how to import it."""

    model_config = ConfigDict(extra="forbid")
    content_base64: str = Field(max_length=MAX_UPLOAD_CHARS, description="The export file, base64-encoded.")
    store: str | None = Field(default=None, description="Import only this store of the export.")
    dry_run: bool = Field(default=False, description="Say what would be written; write nothing.")


class ImportEntryOut(BaseModel):
    """What the import did with one file of the export."""

    model_config = ConfigDict(extra="forbid")
    action: Literal["created", "updated", "unchanged", "conflict", "skipped"]
    source: str
    store: str | None
    path: str | None
    original_id: str | None
    reason: str | None
    findings: dict[str, int] = Field(description="Secrets redacted on the way in, counted by kind.")

    @classmethod
    def of(cls, entry: ImportEntry) -> ImportEntryOut:
        """From the core's ImportEntry."""
        return cls(**entry.to_record())


class ImportReportOut(BaseModel):
    """The outcome of an import: counts by action and one entry per file."""

    model_config = ConfigDict(extra="forbid")
    kind: str
    dry_run: bool
    written: int
    counts: dict[str, int]
    entries: list[ImportEntryOut]

    @classmethod
    def of(cls, report: ImportReport) -> ImportReportOut:
        """From the core's ImportReport."""
        return cls(
            kind=report.kind,
            dry_run=report.dry_run,
            written=report.written,
            counts=report.counts,
            entries=[ImportEntryOut.of(e) for e in report.entries],
        )


def _chunks(spool: IO[bytes]) -> Iterator[bytes]:
    """The export, read back from its temp file (closed, and so removed, at the end)."""
    with spool:
        spool.seek(0)
        while chunk := spool.read(_CHUNK):
            yield chunk


_DOWNLOAD: dict[int | str, dict[str, Any]] = {
    200: {
        "description": "The export file (zip with manifest.json, or JSONL); X-Coffer-Sha256 is its sha256.",
        "content": {media: {"schema": {"type": "string", "format": "binary"}} for media in _MEDIA.values()},
        "headers": {
            "Content-Disposition": {"schema": {"type": "string"}},
            "X-Coffer-Sha256": {"schema": {"type": "string"}},
        },
    }
}


@router.get(
    "/api/v1/export", response_class=StreamingResponse, responses={**_DOWNLOAD, **error_responses(404)}
)
def export_stores(
    svc: Service,
    store: Annotated[
        list[str] | None, Query(description="A store to export (repeat it); default: all.")
    ] = None,
    format: Annotated[Literal["zip", "jsonl"], Query(description="zip (default) or jsonl.")] = "zip",
) -> StreamingResponse:
    """Download the truth files of the stores: a zip with a manifest, or JSONL."""
    out = tempfile.TemporaryFile(prefix="coffer-export-")  # noqa: SIM115  (closed by _chunks)
    try:
        report = svc.export_memory(out, stores=store, format=format)
    except BaseException:
        out.close()
        raise
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    headers = {
        "Content-Disposition": f'attachment; filename="coffer-export-{stamp}.{format}"',
        "X-Coffer-Sha256": report.sha256,
    }
    return StreamingResponse(_chunks(out), media_type=_MEDIA[format], headers=headers)


@router.post(IMPORT_PATH, response_model=ImportReportOut, responses=error_responses(404))
def import_export(body: ImportIn, svc: Service) -> ImportReportOut:
    """Import an uploaded coffer export (idempotent: a second upload writes nothing)."""
    try:
        data = base64.b64decode(body.content_base64, validate=True)
    except (binascii.Error, ValueError):
        raise InvalidInput(f"{UPLOAD_FIELD} is not base64", field=UPLOAD_FIELD) from None
    # The core imports from a path; the upload lives in a private temp file for the call.
    fd, name = tempfile.mkstemp(prefix="coffer-upload-", suffix=".export")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        report = svc.import_memory(name, kind="coffer", store=body.store, dry_run=body.dry_run)
    except InvalidImport as exc:
        if exc.source != name:
            raise
        # The server's temp file means nothing to the client (and is the server's own path): the
        # same refusal, naming the field the upload came in.
        said = exc.message.replace(name, UPLOAD_FIELD)
        raise InvalidImport(
            exc.reason, said, source=UPLOAD_FIELD, member=exc.member, line=exc.line, other=exc.other
        ) from None
    finally:
        os.unlink(name)
    return ImportReportOut.of(report)

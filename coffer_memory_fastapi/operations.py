"""Long-running operations (organize, reorg, reindex, distill): started by a request, polled by id.

One worker thread runs them in order, so two passes never compete for a store's lock and a
burst of requests queues instead of piling threads up. State lives in this process, and in a
folder shared with the other worker processes of ``coffer-api --workers N`` (the next request may
reach another worker); it is lost on restart.
"""

from __future__ import annotations

import json
import os
import re
import threading
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

from ulid import ULID

from coffer_memory import CofferError

from .schemas import DistillBatchOut, ErrorBody, OperationOut, OrganizeResultOut, ReindexResultOut

Kind = Literal["organize", "reorg", "reindex", "distill"]
Outcome = OrganizeResultOut | list[ReindexResultOut] | DistillBatchOut
KEEP = 100
_ID = re.compile(r"[0-9A-HJKMNP-TV-Z]{26}")  # a ULID: the only names read from the shared folder


class OperationNotFound(CofferError):
    """No operation with this id in this server process (or it was forgotten)."""

    code = "OPERATION_NOT_FOUND"

    def __init__(self, op_id: str) -> None:
        super().__init__(f"operation {op_id!r} not found", operation_id=op_id)


def _alive(pid: int) -> bool:
    """True while process ``pid`` runs (a worker of this server, as this process's user)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process took the number: not the worker
        return False
    return True


class Operations:
    """A queue of operations and the state of the last ``KEEP`` of them.

    With ``shared`` (a folder the worker processes of one server share), each state is also
    written there as ``<id>.json``, so any worker answers for an operation another one started.
    """

    def __init__(self, shared: Path | None = None) -> None:
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="coffer-op")
        self._lock = threading.Lock()
        self._ops: OrderedDict[str, OperationOut] = OrderedDict()
        self._shared = shared

    def start(self, kind: Kind, store: str, work: Callable[[], Outcome]) -> OperationOut:
        """Queue ``work`` and return its operation (status ``queued``)."""
        op = OperationOut(
            id=str(ULID()),
            kind=kind,
            store=store,
            status="queued",
            created_at=datetime.now(UTC),
            started_at=None,
            finished_at=None,
            result=None,
            reindex=None,
            error=None,
        )
        with self._lock:
            self._ops[op.id] = op
            self._publish(op)
            while len(self._ops) > KEEP:
                self._forget(self._ops.popitem(last=False)[0])
        self._pool.submit(self._run, op.id, work)
        return op

    def _update(self, op_id: str, **changes: object) -> None:
        with self._lock:
            if op_id in self._ops:
                self._ops[op_id] = self._ops[op_id].model_copy(update=changes)
                self._publish(self._ops[op_id])

    def _publish(self, op: OperationOut) -> None:
        """Write ``op`` to the shared folder, replacing its last state whole (lock held).

        The state names this process: a worker killed mid-operation (and replaced by uvicorn)
        leaves it ``running`` for ever, and the others report it failed instead (``_read``).
        """
        if self._shared is not None:
            temp = self._shared / f".{op.id}.{os.getpid()}.tmp"
            temp.write_text(
                f'{{"pid": {os.getpid()}, "operation": {op.model_dump_json()}}}', encoding="utf-8"
            )
            os.replace(temp, self._shared / f"{op.id}.json")

    def _forget(self, op_id: str) -> None:
        if self._shared is not None:
            (self._shared / f"{op_id}.json").unlink(missing_ok=True)

    def _read(self, op_id: str) -> OperationOut | None:
        """Another worker's operation from the shared folder (None when unknown or forgotten)."""
        if self._shared is None or not _ID.fullmatch(op_id):
            return None
        path = self._shared / f"{op_id}.json"
        try:
            state = json.loads(path.read_bytes())
            op = OperationOut.model_validate(state["operation"])
            if op.status in ("succeeded", "failed") or _alive(int(state["pid"])):
                return op
            stopped = datetime.fromtimestamp(
                path.stat().st_mtime, UTC
            )  # its last word, the same on every poll
        except FileNotFoundError:
            return None
        error = ErrorBody(
            code="INTERNAL",
            message="the server process running this operation stopped before it finished",
            details={"reason": "worker_stopped"},
        )
        return op.model_copy(update={"status": "failed", "finished_at": stopped, "error": error})

    def _run(self, op_id: str, work: Callable[[], Outcome]) -> None:
        self._update(op_id, status="running", started_at=datetime.now(UTC))
        try:
            outcome = work()
        except CofferError as exc:
            error = ErrorBody(code=exc.code, message=exc.message, details=exc.details)
            self._update(op_id, status="failed", finished_at=datetime.now(UTC), error=error)
        except Exception as exc:
            error = ErrorBody(code="INTERNAL", message="internal error", details={"type": type(exc).__name__})
            self._update(op_id, status="failed", finished_at=datetime.now(UTC), error=error)
        else:
            result = outcome if isinstance(outcome, OrganizeResultOut) else None
            reindex = outcome if isinstance(outcome, list) else None
            distill = outcome if isinstance(outcome, DistillBatchOut) else None
            self._update(
                op_id,
                status="succeeded",
                finished_at=datetime.now(UTC),
                result=result,
                reindex=reindex,
                distill=distill,
            )

    def get(self, op_id: str) -> OperationOut:
        """One operation; ``OperationNotFound`` (404) when unknown or forgotten."""
        with self._lock:
            op = self._ops.get(op_id)
        if op is None:
            op = self._read(op_id)
        if op is None:
            raise OperationNotFound(op_id)
        return op

    def list(self) -> list[OperationOut]:
        """Every kept operation (of every worker sharing the folder), newest first."""
        with self._lock:
            ops = {op.id: op for op in reversed(self._ops.values())}
        if self._shared is None:
            return list(ops.values())
        for path in self._shared.glob("*.json"):
            if path.stem not in ops and (op := self._read(path.stem)) is not None:
                ops[op.id] = op
        return sorted(ops.values(), key=lambda op: op.id, reverse=True)[:KEEP]

    def close(self) -> None:
        """Finish the running operation and drop the queued ones."""
        self._pool.shutdown(wait=True, cancel_futures=True)

"""Long-running operations (organize, reorg, reindex, distill): started by a request, polled by id.

One worker thread runs them in order, so two passes never compete for a store's lock and a
burst of requests queues instead of piling threads up. State lives in this process only.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from typing import Literal

from ulid import ULID

from coffer_memory import CofferError

from .schemas import DistillBatchOut, ErrorBody, OperationOut, OrganizeResultOut, ReindexResultOut

Kind = Literal["organize", "reorg", "reindex", "distill"]
Outcome = OrganizeResultOut | list[ReindexResultOut] | DistillBatchOut
KEEP = 100


class OperationNotFound(CofferError):
    """No operation with this id in this server process (or it was forgotten)."""

    code = "OPERATION_NOT_FOUND"

    def __init__(self, op_id: str) -> None:
        super().__init__(f"operation {op_id!r} not found", operation_id=op_id)


class Operations:
    """A queue of operations and the state of the last ``KEEP`` of them."""

    def __init__(self) -> None:
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="coffer-op")
        self._lock = threading.Lock()
        self._ops: OrderedDict[str, OperationOut] = OrderedDict()

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
            while len(self._ops) > KEEP:
                self._ops.popitem(last=False)
        self._pool.submit(self._run, op.id, work)
        return op

    def _update(self, op_id: str, **changes: object) -> None:
        with self._lock:
            if op_id in self._ops:
                self._ops[op_id] = self._ops[op_id].model_copy(update=changes)

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
            raise OperationNotFound(op_id)
        return op

    def list(self) -> list[OperationOut]:
        """Every kept operation, newest first."""
        with self._lock:
            return list(reversed(self._ops.values()))

    def close(self) -> None:
        """Finish the running operation and drop the queued ones."""
        self._pool.shutdown(wait=True, cancel_futures=True)

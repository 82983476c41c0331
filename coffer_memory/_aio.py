"""``AsyncMemoryService``: the service for async apps (FastAPI, ...), without blocking their loop.

Each method has the name and arguments of its ``MemoryService`` twin and runs it in a bounded
thread pool of its own. The service's reads run on one reader connection per thread, so several
calls in flight at once really run side by side; writes still take turns on the writer.
"""

from __future__ import annotations

import asyncio
import atexit
import collections
import contextlib
import contextvars
import functools
import os
import queue
import threading
import time
import types
import weakref
from collections.abc import Callable, Coroutine
from types import TracebackType
from typing import Any, Concatenate, Generic, ParamSpec, TypeVar, overload

from ._errors import InvalidInput, ServiceClosed, safe_echo
from ._service import MemoryService
from ._service_parts import CLOSE_WAIT_SECONDS
from ._transcripts.listing import SessionPage

P = ParamSpec("P")
R = TypeVar("R")
# Threads per facade: each one keeps a reader connection (two while recall fans out).
DEFAULT_MAX_THREADS = min(8, (os.cpu_count() or 1) + 4)


class _InThread(Generic[P, R]):
    """Turns a ``MemoryService`` method into an async method of the facade (typed like it).

    ``slotted`` (``recall``): a keyword call (that mode asked for, or none) first takes one of the
    facade's recall slots on the caller's loop (``AsyncMemoryService.max_recalls``).
    """

    def __init__(self, method: Callable[Concatenate[MemoryService, P], R], *, slotted: bool = False) -> None:
        self.method = method
        self.slotted = slotted
        self.__doc__ = method.__doc__

        # Made once, bound to each facade on access (a method object, as a def in the class
        # body gives): a closure wrapped per access cost a REST recall ~2 us of its event loop.
        async def call(obj: AsyncMemoryService, *args: Any, **kwargs: Any) -> Any:
            if not slotted or kwargs.get("mode") not in (None, "keyword"):  # grep, vectors: mostly waits
                return await obj.run(method, obj.sync, *args, **kwargs)
            async with obj._recall_slots():
                return await obj.run(method, obj.sync, *args, **kwargs)

        self._call = functools.update_wrapper(call, method)

    @overload
    def __get__(self, obj: None, owner: type[Any]) -> _InThread[P, R]: ...
    @overload
    def __get__(self, obj: AsyncMemoryService, owner: type[Any]) -> Callable[P, Coroutine[Any, Any, R]]: ...
    def __get__(
        self, obj: AsyncMemoryService | None, owner: type[Any]
    ) -> _InThread[P, R] | Callable[P, Coroutine[Any, Any, R]]:
        if obj is None:
            return self
        return types.MethodType(self._call, obj)


def usable_cpus() -> int:
    """How many CPUs this process may run on (its affinity, where the system has one)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # no affinity on macOS and Windows
        return os.cpu_count() or 1


class _Stopped(RuntimeError):
    """A call handed to threads that were stopped (by a ``close()`` it raced)."""


_Job = tuple[asyncio.AbstractEventLoop, "asyncio.Future[Any]", Callable[[], Any]]


def _settle(future: asyncio.Future[Any], ok: bool, value: Any) -> None:
    if not future.cancelled():  # the caller stopped waiting: nobody reads the answer
        if ok:
            future.set_result(value)
        else:
            future.set_exception(value)


class _Lanes:
    """What a pool's threads share: the idle threads' inboxes (most recently idle last), the calls
    waiting for a thread (oldest first), and the stop flag. The threads hold this, not the pool."""

    def __init__(self) -> None:
        self.guard = threading.Lock()
        self.idle: list[queue.SimpleQueue[_Job | None]] = []
        self.backlog: collections.deque[_Job] = collections.deque()
        self.closed = False
        self.started = 0

    def stop(self) -> None:
        """No call is taken any more; each idle thread ends now, each busy one after the backlog."""
        with self.guard:
            self.closed = True
            idle, self.idle = self.idle, []
        for inbox in idle:
            inbox.put(None)


class _Threads:
    """Up to ``count`` threads running calls in order, each answer handed to its event loop with
    one ``call_soon_threadsafe``.

    What ``loop.run_in_executor`` does with a ``ThreadPoolExecutor``, without its second future
    per call (a ``concurrent.futures.Future`` with its condition, chained to the asyncio one) and
    its idle-thread semaphore: 20-30 us less CPU a call (docs/benchmarks.md, "REST beside its
    limit, session 9"). A call goes to the thread that went idle last, and a thread starts only
    when every started one is busy: a server with one or two requests in flight keeps running
    them on the same one or two threads, whose reader connections and CPU caches are warm. One
    shared queue woke the threads in turn, each recall on another connection: with one client a
    request now costs 0.76-0.93 of the CPU it did (docs/benchmarks.md, "REST, session 10").
    Threads do not hold the interpreter open, but at exit the calls already queued still run, as
    an executor's do; a pool dropped without ``shutdown`` stops its threads too.
    """

    def __init__(self, count: int, name: str) -> None:
        self._count = count
        self._name = name
        self._lanes = _Lanes()
        self._threads: list[threading.Thread] = []
        # The threads hold the lanes, not this object, so that dropping it stops them.
        self._stop = weakref.finalize(self, self._lanes.stop)
        _running.add(self)

    def submit(self, fn: Callable[[], R]) -> asyncio.Future[R]:
        """Queue ``fn``; the future of the running loop that gets its answer."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[R] = loop.create_future()
        job: _Job = (loop, future, fn)
        lanes = self._lanes
        with lanes.guard:
            if lanes.closed:  # a caller racing close(): refused, as an executor does
                raise _Stopped("cannot run a call: the facade's threads were stopped")
            if lanes.idle:
                lanes.idle.pop().put(job)
            elif lanes.started < self._count:
                lanes.started += 1
                thread = threading.Thread(
                    target=_work,
                    args=(lanes, job),
                    name=f"{self._name}_{len(self._threads)}",
                    daemon=True,
                )
                try:
                    thread.start()
                except BaseException:
                    lanes.started -= 1
                    raise
                self._threads.append(thread)
            else:
                lanes.backlog.append(job)
        return future

    def shutdown(self, timeout: float | None = None) -> None:
        """Run what is queued, then stop every thread; wait up to ``timeout`` seconds for them
        (None: as long as they take)."""
        self.stop()
        self.join(timeout)

    def stop(self) -> None:
        """Take no call any more: idle threads end now, busy ones after the backlog."""
        _running.discard(self)
        self._stop()

    def join(self, timeout: float | None = None) -> None:
        """Wait up to ``timeout`` seconds in all for the threads to end."""
        deadline = None if timeout is None else time.monotonic() + timeout
        for thread in list(self._threads):
            thread.join(None if deadline is None else max(0.0, deadline - time.monotonic()))


def _work(lanes: _Lanes, job: _Job | None) -> None:
    inbox: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
    while job is not None:
        loop, future, fn = job
        answer: tuple[bool, Any] | None = None
        if not future.cancelled():  # cancelled while queued: never started, as with an executor
            try:
                answer = (True, fn())
            except BaseException as exc:  # handed to the awaiting caller, as an executor does
                answer = (False, exc)
        # Idle again before the caller hears the answer: its next call comes to this thread.
        with lanes.guard:
            queued = lanes.backlog.popleft() if lanes.backlog else None
            wait = queued is None and not lanes.closed
            if wait:
                lanes.idle.append(inbox)
        if answer is not None:
            with contextlib.suppress(RuntimeError):  # the loop closed meanwhile: nobody is waiting
                loop.call_soon_threadsafe(_settle, future, *answer)
        del job, loop, future, fn, answer  # not kept alive until the next call
        job = inbox.get() if wait else queued


_running: weakref.WeakSet[_Threads] = weakref.WeakSet()


@atexit.register
def _finish_at_exit() -> None:
    for pool in list(_running):
        pool.shutdown()


def _check_count(value: object, name: str, *, optional: bool) -> None:
    """``InvalidInput`` unless ``value`` is an integer of at least 1 (or None where ``optional``):
    0 threads would leave every call waiting, and ``True`` is no count."""
    if value is None and optional:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InvalidInput(f"{name} must be an integer of at least 1, not {safe_echo(value)!r}", field=name)


class AsyncMemoryService:
    """An async facade over a ``MemoryService``: ``await svc.recall(...)``, ``await svc.remember(...)``.

    ``service=None`` opens ``MemoryService()`` (``$COFFER_HOME``), and a home's path
    ``MemoryService(path)``, and closes it in ``close()``; a service passed in stays the caller's
    to close. ``max_threads`` bounds how many calls run
    at once (the rest wait in order). ``max_recalls`` bounds the keyword recalls (the mode asked
    for, or no mode) that run at once; by default as many as the CPUs this process may run on
    (``usable_cpus``). Use ``async with`` or ``await close()``.

    Why bound recalls: a keyword recall computes from start to end (SQLite and Python, nothing to
    wait for), so more of them at once than CPUs only take turns on those CPUs and on the GIL:
    each finishes later and costs more (GIL hand-overs, colder caches). On a server process kept
    on one CPU (``coffer-api --pin-workers``) with two requests in flight, running them one after
    the other answered at p50 4.5 ms instead of 7.2 at 0.88x the CPU a request (within the noise
    in a run at load 16; docs/benchmarks.md, "REST, session 10"). The others wait in order on the
    event loop, not in a thread; every other call (grep and vector recalls, writes, listings) is
    not held back.
    """

    def __init__(
        self,
        service: MemoryService | str | os.PathLike[str] | None = None,
        *,
        max_threads: int = DEFAULT_MAX_THREADS,
        max_recalls: int | None = None,
    ) -> None:
        _check_count(max_threads, "max_threads", optional=False)
        _check_count(max_recalls, "max_recalls", optional=True)
        if service is not None and not isinstance(service, MemoryService | str | os.PathLike):
            raise InvalidInput(
                f"service must be a MemoryService or a coffer home's path, not {type(service).__name__}",
                field="service",
            )
        # A home's path opens a service of its own there, as MemoryService(home) does.
        self._owned = not isinstance(service, MemoryService)
        self.sync = service if isinstance(service, MemoryService) else MemoryService(service)
        """The wrapped synchronous service (its properties and context managers live there)."""
        self.max_threads = max_threads
        self.max_recalls = max_recalls
        self._pool: _Threads | None = None
        self._guard = threading.Lock()
        self._closed = False
        # Per event loop: an asyncio.Semaphore belongs to the loop it first waited on.
        self._slots: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Semaphore] = (
            weakref.WeakKeyDictionary()
        )

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.sync!r})"

    def _recall_slots(self) -> asyncio.Semaphore:
        loop = asyncio.get_running_loop()
        slots = self._slots.get(loop)
        if slots is None:  # counted at the first recall: a server pins its process before that
            slots = asyncio.Semaphore(self.max_recalls or usable_cpus())
            self._slots[loop] = slots
        return slots

    def _threads(self) -> _Threads:
        pool = self._pool
        if pool is None:
            with self._guard:
                if self._pool is None:
                    self._pool = _Threads(self.max_threads, "coffer-async")
                pool = self._pool
        return pool

    async def run(self, fn: Callable[..., R], /, *args: Any, **kwargs: Any) -> R:
        """Run any blocking call in this facade's threads (context variables go along)."""
        call = functools.partial(contextvars.copy_context().run, fn, *args, **kwargs)
        try:
            future = self._threads().submit(call)
        except _Stopped:  # it took the threads a close() was stopping
            if self._owned and self._closed:
                raise ServiceClosed() from None
            future = self._threads().submit(call)  # a later call starts them again
        return await future

    async def close(self, timeout: float | None = CLOSE_WAIT_SECONDS) -> None:
        """Let running calls finish and stop the threads (a later call starts them again); close
        the service too if this facade opened it (``MemoryService.close``: calls after that fail
        with ``ServiceClosed``). Waits up to ``timeout`` seconds (None: as long as they take) for
        the calls running; closing twice does nothing more."""
        await asyncio.get_running_loop().run_in_executor(None, self._shutdown, timeout)

    def _shutdown(self, timeout: float | None) -> None:
        with self._guard:
            pool, self._pool = self._pool, None
            self._closed = True
        if pool is not None:
            pool.stop()
        if self._owned:
            self.sync.close(timeout)  # waits for the running calls; the queued ones fail, typed
        if pool is not None:
            pool.join(timeout)

    async def __aenter__(self) -> AsyncMemoryService:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    async def list_transcripts(self, agent: str, **filters: Any) -> SessionPage:
        """Past sessions of one agent, newest first (``MemoryService.list_transcripts``)."""
        # Spelled out: **filters after ``self`` cannot be typed through Concatenate.
        return await self.run(self.sync.list_transcripts, agent, **filters)

    # -- the service's methods, each run in a thread ---------------------------------------------
    paths = _InThread(MemoryService.paths)
    target = _InThread(MemoryService.target)
    resolve_store = _InThread(MemoryService.resolve_store)
    resolve_scope = _InThread(MemoryService.resolve_scope)
    recall_stores = _InThread(MemoryService.recall_stores)
    audit_events = _InThread(MemoryService.audit_events)
    audit = _InThread(MemoryService.audit)
    project_optout = _InThread(MemoryService.project_optout)
    repository_offers = _InThread(MemoryService.repository_offers)
    remember = _InThread(MemoryService.remember)
    recall = _InThread(MemoryService.recall, slotted=True)
    list_facts = _InThread(MemoryService.list_facts)
    get_fact = _InThread(MemoryService.get_fact)
    edit_fact = _InThread(MemoryService.edit_fact)
    delete_fact = _InThread(MemoryService.delete_fact)
    clear = _InThread(MemoryService.clear)
    journal_append = _InThread(MemoryService.journal_append)
    journal = _InThread(MemoryService.journal)
    delete_journal = _InThread(MemoryService.delete_journal)
    save_handoff = _InThread(MemoryService.save_handoff)
    resume = _InThread(MemoryService.resume)
    handoffs = _InThread(MemoryService.handoffs)
    delete_handoff = _InThread(MemoryService.delete_handoff)
    rules = _InThread(MemoryService.rules)
    append_rule = _InThread(MemoryService.append_rule)
    delete_rules = _InThread(MemoryService.delete_rules)
    consolidation_log = _InThread(MemoryService.consolidation_log)
    log_change = _InThread(MemoryService.log_change)
    delete_consolidation_log = _InThread(MemoryService.delete_consolidation_log)
    regenerate_index = _InThread(MemoryService.regenerate_index)
    archive_version = _InThread(MemoryService.archive_version)
    assemble_session_context = _InThread(MemoryService.assemble_session_context)
    store_info = _InThread(MemoryService.store_info)
    stores = _InThread(MemoryService.stores)
    set_label = _InThread(MemoryService.set_label)
    clear_label = _InThread(MemoryService.clear_label)
    delete_store = _InThread(MemoryService.delete_store)
    merge_stores = _InThread(MemoryService.merge_stores)
    store_config = _InThread(MemoryService.store_config)
    set_store_config = _InThread(MemoryService.set_store_config)
    reindex = _InThread(MemoryService.reindex)
    startup_sweep = _InThread(MemoryService.startup_sweep)
    doctor = _InThread(MemoryService.doctor)
    organize = _InThread(MemoryService.organize)
    reorganize = _InThread(MemoryService.reorganize)
    transcript_summary = _InThread(MemoryService.transcript_summary)
    show_transcript = _InThread(MemoryService.show_transcript)
    find_session = _InThread(MemoryService.find_session)
    distill_session = _InThread(MemoryService.distill_session)
    end_session = _InThread(MemoryService.end_session)
    sweep = _InThread(MemoryService.sweep)
    forget_session = _InThread(MemoryService.forget_session)
    session_facts = _InThread(MemoryService.session_facts)
    distilled_sessions = _InThread(MemoryService.distilled_sessions)
    agents = _InThread(MemoryService.agents)
    agent_status = _InThread(MemoryService.agent_status)
    install_agent = _InThread(MemoryService.install_agent)
    uninstall_agent = _InThread(MemoryService.uninstall_agent)
    set_native_memory = _InThread(MemoryService.set_native_memory)
    export_memory = _InThread(MemoryService.export_memory)
    import_memory = _InThread(MemoryService.import_memory)

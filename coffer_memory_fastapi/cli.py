"""``coffer-api``: serve the REST app with uvicorn (127.0.0.1 by default)."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import copy
import inspect
import json
import logging
import os
import shutil
import signal
import socket
import sys
import tempfile
import threading
import time
import webbrowser
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from coffer_memory._interrupt import ready

if TYPE_CHECKING:
    import uvicorn
    from fastapi import FastAPI

HOSTS_ENV = "COFFER_API_ALLOWED_HOSTS"
CORS_ENV = "COFFER_API_CORS_ORIGINS"
ORIGINS_ENV = "COFFER_API_ALLOWED_ORIGINS"
CONNECTIONS_ENV = "COFFER_API_MAX_CONNECTIONS"
FORWARDED_ENV = "COFFER_API_FORWARDED_ALLOW_IPS"
WORKER_ENV = "COFFER_API_WORKER"
"""What ``coffer-api --workers N`` hands its worker processes (JSON: token, hosts, CORS, operations)."""
_WILDCARDS = ("0.0.0.0", "::", "")
HTTP_PROTOCOL = "coffer_memory_fastapi.http_errors:EnvelopeProtocol"
"""uvicorn's protocol refusing a request that is not HTTP with the envelope (by name: each worker
process imports it, and ``coffer-api --version`` never does)."""


def _listed(value: str | None) -> list[str]:
    """A comma-separated environment value as a list (empty items dropped)."""
    return [item.strip() for item in (value or "").split(",") if item.strip()]


def port_number(value: str) -> int:
    """``--port``: a TCP port, 0-65535 (0: any free port); argparse reports anything else."""
    if not value.isdigit() or int(value) > 65535:
        raise argparse.ArgumentTypeError(f"{value!r} is not a port number (0-65535)")
    return int(value)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``coffer-api``."""
    from coffer_memory import __version__
    from coffer_memory._http_conns import DEFAULT_MAX_CONNECTIONS, max_connections

    parser = argparse.ArgumentParser(prog="coffer-api", description="Serve coffer-memory over REST.")
    parser.add_argument("--host", default="127.0.0.1", help="interface to bind (default 127.0.0.1)")
    parser.add_argument("--port", type=port_number, default=8765, help="port (default 8765)")
    parser.add_argument(
        "--token", default=None, help="require 'Authorization: Bearer <token>' (default: $COFFER_API_TOKEN)"
    )
    parser.add_argument(
        "--allowed-host",
        action="append",
        default=[],
        metavar="NAME[:PORT]",
        help="serve requests whose Host is this name too (repeatable; also $COFFER_API_ALLOWED_HOSTS, "
        "comma-separated); loopback names and the bound address are always served",
    )
    parser.add_argument(
        "--cors-origin",
        action="append",
        default=[],
        metavar="ORIGIN",
        help="let web pages of this origin (e.g. https://app.example) call the API with CORS "
        "(repeatable; also $COFFER_API_CORS_ORIGINS); CORS is off by default",
    )
    parser.add_argument(
        "--allowed-origin",
        action="append",
        default=[],
        metavar="ORIGIN",
        help="serve requests from web pages of this origin too (e.g. http://localhost:3000), without "
        f"CORS (repeatable; also ${ORIGINS_ENV}); by default only the server's own origin",
    )
    parser.add_argument(
        "--max-connections",
        type=max_connections,
        default=None,
        metavar="N",
        help=f"hold at most N connections (per process with --workers); a connection past them is "
        f"answered 503 (default {DEFAULT_MAX_CONNECTIONS}, or ${CONNECTIONS_ENV})",
    )
    parser.add_argument(
        "--forwarded-allow-ips",
        action="append",
        default=[],
        metavar="ADDR[,ADDR]",
        help="believe X-Forwarded-For and X-Forwarded-Proto from these addresses or networks (a "
        f"proxy in front; repeatable; also ${FORWARDED_ENV}); by default from none",
    )
    parser.add_argument("--home", default=None, help="coffer home (default: $COFFER_HOME, else ~/.coffer)")
    parser.add_argument(
        "--open",
        action="store_true",
        help="open the read-only web view (/ui) in the browser once the server answers",
    )
    parser.add_argument(
        "--log-level",
        default="info",
        choices=["critical", "error", "warning", "info", "debug"],
        help="the least severe log line the server writes to stderr (default info)",
    )
    parser.add_argument(
        "--workers",
        type=int,
        default=1,
        metavar="N",
        help="serve from N processes (default 1); each has its own index connections (docs/rest.md)",
    )
    parser.add_argument("--version", action="version", version=f"coffer-api {__version__}")
    parser.add_argument(
        "--pin-workers",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="with --workers N: keep each worker process on one CPU of its own (Linux); by default "
        "only when N is the number of CPUs the server may use; --no-pin-workers: never (docs/rest.md)",
    )
    parser.add_argument(
        "--access-log",
        action="store_true",
        help="log one line per request (off by default: agents call often, and each line costs time)",
    )
    return parser


class _QueryValuesHidden(logging.Filter):
    """``--access-log`` lines without the values of a query string (``?token=…&query=…``):
    ``/ui?token=<token>`` wrote the API token to the log, and a recall's ``?query=`` whatever an
    agent searched for, a pasted secret included. The path and the keys stay, for debugging."""

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        # uvicorn's access record: (client address, method, path with query, HTTP version, status)
        if isinstance(args, tuple) and len(args) == 5 and isinstance(args[2], str) and "?" in args[2]:
            path, _, query = args[2].partition("?")
            hidden = "&".join(
                f"{part.split('=', 1)[0]}=…" if "=" in part else "…" for part in query.split("&")
            )
            record.args = (args[0], args[1], f"{path}?{hidden}", args[3], args[4])
        return True


def _access_log_config() -> dict[str, Any]:
    """uvicorn's logging configuration with ``_QueryValuesHidden`` on its access log handler and
    ``RepeatedWarnings`` on its error logger (given to every worker: each configures its logging
    from it)."""
    from uvicorn.config import LOGGING_CONFIG

    config: dict[str, Any] = copy.deepcopy(LOGGING_CONFIG)
    config.setdefault("filters", {})["query_values_hidden"] = {"()": f"{__name__}._QueryValuesHidden"}
    config["handlers"]["access"].setdefault("filters", []).append("query_values_hidden")
    # uvicorn's warnings about one bad request each: once a minute, not once a request.
    config["filters"]["repeated_warnings"] = {"()": "coffer_memory._http_conns.RepeatedWarnings"}
    config["loggers"].setdefault("uvicorn.error", {}).setdefault("filters", []).append("repeated_warnings")
    return config


def ui_url(host: str, port: int, token: str | None) -> str:
    """The address of the web view for a server bound to ``host:port`` (token passed once)."""
    name = "127.0.0.1" if host in _WILDCARDS else host
    authority = f"[{name}]:{port}" if ":" in name else f"{name}:{port}"
    return f"http://{authority}/ui" + (f"?token={quote(token, safe='')}" if token else "")


def _open_when_up(host: str, port: int, url: str, deadline_s: float = 30.0) -> None:
    """Open ``url`` in the browser as soon as the port accepts connections (gives up quietly)."""
    target = "127.0.0.1" if host in _WILDCARDS else host
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        try:
            with socket.create_connection((target, port), timeout=0.5):
                webbrowser.open(url)
                return
        except OSError:
            time.sleep(0.1)


def main(argv: list[str] | None = None) -> int:
    """Parse arguments and run uvicorn until interrupted (Ctrl-C: status 0, at any point)."""
    try:
        ready()  # from here a Ctrl-C is the KeyboardInterrupt below (before, _coffer_scripts' 0)
        return _main(argv)
    except KeyboardInterrupt:
        # Ctrl-C before the server runs (its imports take seconds on a loaded machine) printed a
        # traceback; it ends as Ctrl-C after start-up does: quietly, status 0.
        return 0


def _main(argv: list[str] | None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)

    try:
        import uvicorn

        from coffer_memory._http_conns import connections_option
        from coffer_memory._http_hosts import LOOPBACK_HOSTS, HostRule, forwarded_config, origins_option

        from .app import create_app
    except ModuleNotFoundError as exc:  # a plain `pip install coffer-memory` has no fastapi
        print(
            f"coffer-api: the REST server needs the [fastapi] extra, and {exc.name} is not installed: "
            "pip install 'coffer-memory[fastapi]'",
            file=sys.stderr,
        )
        return 1
    from coffer_memory import CofferError, MemoryService

    token = args.token or os.environ.get("COFFER_API_TOKEN") or None
    hosts = [*args.allowed_host, *_listed(os.environ.get(HOSTS_ENV))]
    if args.host not in _WILDCARDS:
        hosts.append(args.host)  # the bound address, by the name it was given
    try:
        HostRule(hosts)
    except ValueError as exc:
        parser.error(str(exc))
    cors = origins_option(parser, args.cors_origin, CORS_ENV, "--cors-origin")
    origins = origins_option(parser, args.allowed_origin, ORIGINS_ENV)
    limit = connections_option(parser, args.max_connections, CONNECTIONS_ENV)
    forwarded = forwarded_config(parser, args.forwarded_allow_ips, FORWARDED_ENV)
    if args.host not in LOOPBACK_HOSTS and not token:
        print("coffer-api: warning: listening beyond loopback without --token", file=sys.stderr)
    if args.workers < 1:
        parser.error("--workers must be at least 1")
    if args.pin_workers and args.workers < 2:
        parser.error("--pin-workers needs --workers 2 or more (one process uses every CPU it may)")
    pin = pins_by_default(args.workers) if args.pin_workers is None else args.pin_workers
    serve = {
        "host": args.host,
        "port": args.port,
        "log_level": args.log_level,
        "access_log": args.access_log,
        "log_config": _access_log_config(),
        "http": HTTP_PROTOCOL,
        "limit_concurrency": limit,  # judged per connection by the protocol (coffer_memory._http_conns)
        **forwarded,  # X-Forwarded-* believed from the proxies named, none by default
    }
    try:  # a bad home or config.toml is one line here, not a traceback in every worker it respawns
        service = MemoryService(args.home)
    except CofferError as exc:
        print(f"coffer-api: {exc.code}: {exc.message}", file=sys.stderr)
        return 1
    if args.workers > 1:
        service.close()
        config = uvicorn.Config(f"{__name__}:worker_app", factory=True, workers=args.workers, **serve)
    else:
        app = create_app(
            service, token=token, allowed_hosts=hosts, cors_origins=cors, allowed_origins=origins
        )
        config = uvicorn.Config(app, **serve)
    try:
        sock = listening_socket(config)  # a port that is taken: uvicorn's one line and status 3
        port = sock.getsockname()[1]
        if args.port == 0:  # any free port: say which (tests and scripts read this line)
            print(f"coffer-api: listening on {_base_url(args.host, port)}", file=sys.stderr, flush=True)
        if args.open:
            url = ui_url(args.host, port, token)
            print(f"coffer-api: web view at {url.partition('?')[0]}", file=sys.stderr)
            threading.Thread(target=_open_when_up, args=(args.host, port, url), daemon=True).start()
        if args.workers > 1:
            return _serve_workers(config, sock, args.home, token, hosts, [cors, origins], pin=pin)
        server = uvicorn.Server(config)
        # Ctrl-C: uvicorn shuts down cleanly, then re-raises the signal it caught, which printed
        # two tracebacks (``uvicorn.run`` swallows that KeyboardInterrupt; we call ``Server.run``).
        with contextlib.suppress(KeyboardInterrupt):
            server.run(sockets=[sock])
        return 0 if server.started else STARTUP_FAILURE
    finally:
        service.close()


def pins_by_default(workers: int, cpus: int | None = None) -> bool:
    """Whether ``--workers N`` pins its workers when neither ``--pin-workers`` nor
    ``--no-pin-workers`` is given: on Linux, when there are two or more and as many as the CPUs
    the server may use (``cpus``; by default this process's). Each worker would then have a CPU's
    worth of work anyway; left to the scheduler, a worker's event loop and pool threads ran on
    different CPUs about half the time, and two unpinned workers on two CPUs met issue #15's REST
    target in fewer rounds, with a p95 several times that of pinned ones (docs/benchmarks.md,
    "rest25"). With fewer workers than CPUs nothing is pinned: the CPUs left over are where the
    scheduler moves other work."""
    from coffer_memory._aio import usable_cpus

    if not sys.platform.startswith("linux") or not hasattr(os, "sched_setaffinity"):
        return False
    return workers >= 2 and workers == (usable_cpus() if cpus is None else cpus)


def _serve_workers(
    config: uvicorn.Config,
    sock: socket.socket,
    home: str | None,
    token: str | None,
    hosts: list[str],
    origins: list[list[str]],
    *,
    pin: bool = False,
) -> int:
    """Run ``config.workers`` uvicorn processes on ``sock``, each building the app with
    ``worker_app`` (``origins``: the CORS origins and the allowed ones; ``pin``: each on one CPU,
    ``cpus.pin_to_one_cpu``).

    The workers share the index through SQLite's WAL (each has its own connections, as separate
    ``coffer`` processes do) and operation state through a folder that lives as long as this run.
    """
    import uvicorn

    if home is not None:
        os.environ["COFFER_HOME"] = os.path.abspath(home)  # the workers' MemoryService() reads it
    with tempfile.TemporaryDirectory(prefix="coffer-api-operations-") as operations:
        spec = worker_spec(config.workers, token, hosts, origins, operations, pin=pin)
        os.environ[WORKER_ENV] = json.dumps(spec)
        # uvicorn.run's own branch for workers, with the listening socket made by listening_socket.
        from uvicorn.supervisors import Multiprocess

        older = "target" in inspect.signature(Multiprocess).parameters  # older uvicorns take the target
        supervisor = {"target": uvicorn.Server(config).run} if older else {}
        Multiprocess(config, sockets=[sock], **supervisor).run()
    return 0


def worker_spec(
    workers: int,
    token: str | None,
    hosts: list[str],
    origins: list[list[str]],
    operations: str,
    *,
    pin: bool = False,
) -> dict[str, Any]:
    """What ``worker_app`` reads in each of ``workers`` processes (``WORKER_ENV``, as JSON).

    ``recalls``: the keyword recalls a worker runs at once, its share of the CPUs the server may
    use (at least 1; None for a pinned worker, whose facade counts its one CPU). Each worker
    bounded them by every CPU: two unpinned workers on two CPUs each ran two recalls at once on
    one GIL, their threads spread over both CPUs, and needed more CPU a request than one recall
    at a time each (docs/benchmarks.md, "rest25").
    """
    from coffer_memory._aio import usable_cpus

    return {
        "recalls": None if pin else max(1, usable_cpus() // workers),
        "token": token,
        "hosts": hosts,
        "cors": origins[0],
        "origins": origins[1],
        "operations": operations,
        "supervisor": os.getpid(),
        "pin": pin,
    }


STARTUP_FAILURE = 3
"""uvicorn's exit status for a server that could not start (a taken port, a failed start-up)."""


def listening_socket(config: uvicorn.Config) -> socket.socket:
    """The server's socket, bound and listening before the app is built, with ``TCP_NODELAY`` set.

    Bound here, not by uvicorn, so that ``--port 0`` can say the port it got (the kernel picks
    it; a port picked by a caller and passed on could be taken by another process in between)
    and ``--open`` opens that port. Listening at once: a client that read the port connects, and
    its request waits in the backlog until the app serves. One socket for every ``--workers``
    process.

    Older uvicorns made this socket with protocol number 0, and asyncio sets ``TCP_NODELAY`` only
    on connections it sees as TCP (protocol 6): the workers' connections had Nagle's algorithm on,
    and a response written in two parts (head, then body) waited ~40 ms for the client's delayed
    ACK (48 ms per request instead of 4 in bench/rest.py). Linux gives the option of a listening
    socket to every connection accepted from it.
    """
    sock = config.bind_socket()
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.listen(config.backlog)
    return sock


def _base_url(host: str, port: int) -> str:
    """``http://host:port`` of a server bound to ``host`` (a wildcard as 127.0.0.1)."""
    return ui_url(host, port, None).removesuffix("/ui")


def worker_app() -> FastAPI:
    """The app of one ``coffer-api --workers N`` process (uvicorn calls it in each worker)."""
    from . import balance
    from .app import create_app
    from .cpus import pin_to_one_cpu

    spec = json.loads(os.environ.pop(WORKER_ENV))  # not passed on to the git or rg it runs
    if spec.get("pin"):  # before any thread starts: the threads to come inherit the CPU
        pin_to_one_cpu(f"{spec['supervisor']}-{Path(spec['operations']).name}")
    threading.Thread(
        target=_stop_with_supervisor,
        args=(spec["supervisor"], spec["operations"]),
        name="coffer-orphan",
        daemon=True,
    ).start()
    app = create_app(
        token=spec["token"],
        allowed_hosts=spec["hosts"],
        cors_origins=spec["cors"],
        allowed_origins=spec["origins"],
        operations_dir=Path(spec["operations"]),
        max_recalls=spec.get("recalls"),
    )
    # uvicorn builds the app in its running loop, before that loop starts serving the socket.
    # Counted only now: the siblings leave connections to a worker that is about to take them.
    balance.install(asyncio.get_running_loop(), Path(spec["operations"]) / "connections")
    return app


def _stop_with_supervisor(supervisor: int, operations: str, every_s: float = 1.0) -> None:
    """Stop this worker once its supervisor is gone (``kill -9``, the OOM killer).

    uvicorn's workers outlive a supervisor that could not stop them: they kept serving the port,
    so a restarted ``coffer-api`` could not bind it, and the operations folder stayed behind. The
    worker removes that folder (the run is over) and stops as on Ctrl-C. The supervisor's pid comes
    from the supervisor itself: a worker still starting when it died has a parent of 1 already.
    """
    while os.getppid() == supervisor:
        time.sleep(every_s)
    shutil.rmtree(operations, ignore_errors=True)
    os.kill(os.getpid(), signal.SIGTERM)


if __name__ == "__main__":
    raise SystemExit(main())

"""The snapshot of coffer-mcp's handshake answers, which the stdio entry serves before the SDK loads.

``handshake.json`` (package data) holds what the SDK server itself answers to ``initialize``,
``ping`` and the lists of tools, prompts and resources for every protocol version it negotiates, and the versions of the
packages those answers depend on (the SDK, its types, pydantic, which writes the input schemas,
and coffer). At run time it is used only when the installed versions are the snapshot's
(``load_snapshot``), read from the installed metadata without importing any of them. Where they
differ (pip chose another pydantic or SDK), the first start takes the plain path and records a
snapshot of its own in ``<home>/cache/mcp-handshake.json`` (``record_snapshot``), which later
starts use while the versions stay the same.
Regenerate it after changing the tools or upgrading the SDK:

    .venv/bin/python -m coffer_memory_mcp._handshake          # rewrite handshake.json
    .venv/bin/python -m coffer_memory_mcp._handshake --check  # exit 1 when it is stale

``tests/test_mcp_handshake.py`` fails when the committed file differs from a fresh one.
"""

from __future__ import annotations

import json
import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = [
    "KEY_DISTRIBUTIONS",
    "Snapshot",
    "cache_file",
    "generate",
    "installed_versions",
    "load_snapshot",
    "record_snapshot",
]

SNAPSHOT_PATH = Path(__file__).with_name("handshake.json")
CACHE_NAME = "mcp-handshake.json"
KEY_DISTRIBUTIONS = ("coffer-memory", "mcp", "mcp-types", "pydantic", "pydantic-core")
"""The distributions whose versions the snapshot's answers depend on."""
FAST_METHODS = ("ping", "tools/list", "prompts/list", "resources/list", "resources/templates/list")
"""Requests answered from the snapshot once ``initialize`` was: their results take no input (the
resources are fixed URIs). Claude Code asks for all the lists at once and waits for every one."""
_UNKNOWN_VERSION = "1900-01-01"  # a version no SDK speaks: the generator learns the SDK's counter-offer


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "_", name).lower()


def installed_versions(names: tuple[str, ...] = KEY_DISTRIBUTIONS) -> dict[str, str | None]:
    """The installed version of each distribution, as ``importlib.metadata.version`` reads it.

    The first ``sys.path`` entry holding a ``<name>-<version>.dist-info`` wins, as in
    ``importlib.metadata``; importing that module costs more than the whole fast handshake.
    """
    wanted = {_normal(n): n for n in names}
    found: dict[str, str | None] = dict.fromkeys(names)
    for entry in sys.path:
        try:
            listing = os.listdir(entry or ".")
        except OSError:
            continue
        for item in listing:
            if not item.endswith(".dist-info"):
                continue
            dist, _, version = item[: -len(".dist-info")].partition("-")
            name = wanted.get(_normal(dist))
            if name is not None and found[name] is None:
                found[name] = version
    return found


@dataclass(frozen=True)
class Snapshot:
    """The recorded answers: ``results[version][method]`` for each negotiable version."""

    results: dict[str, dict[str, Any]]
    counter_offer: str
    """The version the SDK answers a client whose version it does not speak."""

    def negotiate(self, requested: str) -> str:
        """The protocol version the SDK settles on for a client asking for ``requested``."""
        return requested if requested in self.results else self.counter_offer

    def result(self, version: str, method: str) -> Any:
        """The SDK's ``result`` for ``method`` (``initialize`` or a ``FAST_METHODS`` one)."""
        return self.results[version][method]


def _misshapen(data: Any) -> str | None:
    """What keeps ``data`` from being a snapshot, or None. A recorded one is a file of the home: it
    may come from another coffer (a downgrade) or a hand edit, and must never stop coffer-mcp."""
    if not isinstance(data, dict):
        return "not an object"
    packages, results, offer = data.get("packages"), data.get("results"), data.get("counter_offer")
    if not isinstance(packages, dict) or not all(isinstance(v, (str, type(None))) for v in packages.values()):
        return "packages is not an object of versions"
    if not isinstance(results, dict) or not isinstance(offer, str) or offer not in results:
        return "results holds no answers for its counter_offer"
    methods = ("initialize", *FAST_METHODS)
    for version, answers in results.items():
        if not isinstance(answers, dict) or not all(isinstance(answers.get(m), dict) for m in methods):
            return f"results for {version} lack an answer to one of {', '.join(methods)}"
    return None


def _build(packaged: Path) -> str:
    """The sha256 of the packaged snapshot (of nothing when it is missing). A recorded snapshot is
    for that build: an editable install keeps its version while its tools change, and the packaged
    snapshot is regenerated with them (a test fails until it is)."""
    import hashlib

    try:
        return hashlib.sha256(packaged.read_bytes()).hexdigest()
    except OSError:
        return hashlib.sha256(b"").hexdigest()


def _load(path: Path, build: str | None = None) -> tuple[Snapshot | None, str]:
    """The snapshot at ``path`` when it fits the installed packages (and, given ``build``, was
    recorded by that build), else ``None``; and why."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None, f"no snapshot at {path}"
    except (OSError, ValueError) as exc:
        return None, f"no usable snapshot at {path}: {exc!r}"
    problem = _misshapen(data)
    if problem is not None:
        return None, f"no usable snapshot at {path}: {problem}"
    if build is not None and data.get("build") != build:
        return None, f"{path.name} was recorded by another build of coffer-mcp"
    recorded: dict[str, str | None] = data["packages"]
    snapshot = Snapshot(results=data["results"], counter_offer=data["counter_offer"])
    installed = installed_versions(tuple(recorded))
    differ = [
        f"{n} {recorded[n]} (installed: {installed[n]})" for n in recorded if installed[n] != recorded[n]
    ]
    if differ or set(recorded) != set(KEY_DISTRIBUTIONS):
        return None, f"{path.name} is for " + (", ".join(differ) or "other packages")
    return snapshot, f"{path} fits the installed packages"


def cache_file(home: str | None) -> Path:
    """Where ``coffer-mcp`` keeps the snapshot it recorded itself: ``<home>/cache/``.

    The packaged snapshot fits only the package versions it was made with; a user whose pip
    chose another pydantic or SDK would otherwise always wait for the SDK at start-up.
    """
    base = home if home is not None else (os.environ.get("COFFER_HOME") or "~/.coffer")
    return Path(os.path.abspath(os.path.expanduser(base))) / "cache" / CACHE_NAME


def load_snapshot(path: Path = SNAPSHOT_PATH, cached: Path | None = None) -> tuple[Snapshot | None, str]:
    """The packaged snapshot when it fits the installed packages, else the one ``coffer-mcp``
    recorded in ``cached`` when that fits, else ``None``; and why, in words."""
    snapshot, reason = _load(path)
    if snapshot is not None or cached is None:
        return snapshot, reason
    kept, why = _load(cached, _build(path))
    return kept, f"{reason}; {why}"


def record_snapshot(home: str | None, packaged: Path = SNAPSHOT_PATH) -> Path:
    """Record what the installed SDK answers into ``cache_file(home)`` (atomically, 0600), for the
    build whose packaged snapshot is ``packaged``.

    ``coffer-mcp`` runs this on a thread when no snapshot fitted, so its next start is fast.
    """
    import tempfile

    from coffer_memory import write_home_cache

    with tempfile.TemporaryDirectory(prefix="coffer-handshake-") as scratch:
        text = render({**generate(scratch), "build": _build(packaged)})
    return write_home_cache(home, CACHE_NAME, text.encode("utf-8"))


class _Lines:
    """An async line source for ``stdio_server`` that ends once ``expected`` answers were written."""

    def __init__(self, lines: list[str], sink: _Sink) -> None:
        self._lines = lines
        self._sink = sink

    def __aiter__(self) -> _Lines:
        return self

    async def __anext__(self) -> str:
        if self._lines:
            return self._lines.pop(0)
        await self._sink.done.wait()
        raise StopAsyncIteration


class _Sink:
    """An async text sink for ``stdio_server`` collecting the answers it writes."""

    def __init__(self, expected: int) -> None:
        import anyio

        self.answers: dict[Any, Any] = {}
        self._expected = expected
        self.done = anyio.Event()

    async def write(self, text: str) -> None:
        message = json.loads(text)
        self.answers[message["id"]] = message.get("result", message.get("error"))
        if len(self.answers) == self._expected:
            self.done.set()

    async def flush(self) -> None:
        """Nothing is buffered."""


def _session(server: Any, version: str) -> dict[str, Any]:
    """The answers of ``server``, over the stdio transport, to one client asking for ``version``."""
    import anyio

    from .cli import _serve_stdio

    init = {"protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "gen", "version": "0"}}
    requests = [("initialize", init), *((m, None) for m in FAST_METHODS)]
    lines = [
        json.dumps({"jsonrpc": "2.0", "id": i, "method": m, "params": p}) + "\n"
        for i, (m, p) in enumerate(requests)
    ]
    lines.insert(1, json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}) + "\n")
    sink = _Sink(len(requests))
    anyio.run(_serve_stdio, server, _Lines(lines, sink), sink)
    return {method: sink.answers[i] for i, (method, _) in enumerate(requests)}


def generate(home: str) -> dict[str, Any]:
    """A fresh snapshot from the installed SDK serving ``build_server`` over a home at ``home``."""
    from mcp_types.version import KNOWN_PROTOCOL_VERSIONS

    from coffer_memory import MemoryService

    from .server import build_server

    results: dict[str, dict[str, Any]] = {}
    with MemoryService(home) as service:
        server = build_server(service)
        counter_offer = _session(server, _UNKNOWN_VERSION)["initialize"]["protocolVersion"]
        for version in KNOWN_PROTOCOL_VERSIONS:
            answers = _session(server, version)
            # Only versions the SDK agrees to: any other is answered with the counter-offer.
            if answers["initialize"]["protocolVersion"] == version:
                results[version] = answers
    if counter_offer not in results:
        raise RuntimeError(f"the SDK counter-offered {counter_offer!r}, which it does not agree to itself")
    return {
        "comment": "What coffer-mcp's SDK server answers; generated by python -m coffer_memory_mcp._handshake",
        "packages": installed_versions(),
        "counter_offer": counter_offer,
        "results": results,
    }


def render(snapshot: dict[str, Any]) -> str:
    """The file text of a snapshot (stable, so a regeneration diffs cleanly)."""
    return json.dumps(snapshot, indent=1, sort_keys=True, ensure_ascii=False) + "\n"


def main(argv: list[str] | None = None) -> int:
    """Rewrite ``handshake.json``, or with ``--check`` say whether it is current (exit 1 if not)."""
    import tempfile

    args = sys.argv[1:] if argv is None else argv
    with tempfile.TemporaryDirectory(prefix="coffer-handshake-") as home:
        text = render(generate(home))
    if "--check" in args:
        current = SNAPSHOT_PATH.read_text(encoding="utf-8") if SNAPSHOT_PATH.exists() else ""
        if current != text:
            print(f"{SNAPSHOT_PATH} is stale: run python -m coffer_memory_mcp._handshake", file=sys.stderr)
            return 1
        return 0
    SNAPSHOT_PATH.write_text(text, encoding="utf-8")
    print(f"wrote {SNAPSHOT_PATH}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""``coffer-hook --agent <name>``: the command an agent runs at session start and session end.

The agent writes a JSON payload to stdin (``session_id``, ``cwd``, ``hook_event_name``,
``source`` or ``reason``, ``transcript_path``) and waits for us, so this command:

- never fails the agent: any problem (bad stdin, no store, server down, deadline) prints
  nothing and exits 0; the failure goes to ``<COFFER_HOME>/logs/hook.log`` (rotated), never
  to the agent's terminal;
- has a hard deadline (``COFFER_HOOK_DEADLINE`` seconds, default 3; the installed hook entry
  gives the agent a larger timeout) enforced with ``SIGALRM``;
- starts fast: it imports only the path and rules helpers, not the index or pydantic.

SessionStart prints ``{"hookSpecificOutput": {"hookEventName": "SessionStart",
"additionalContext": <bundle>}}`` and records, per session id, the bundle given (``given``): a
session resumed (``source`` ``resume``) with its rules unchanged gets nothing, one whose rules
changed gets a short note of the changes; ``startup``, ``clear``, ``compact`` and ``fork`` get the
bundle.
SessionEnd hands the session to distillation without waiting: a detached ``python -m
coffer_memory._session_end`` process, or, with ``COFFER_API_URL`` set, ``POST
/api/v1/agents/{name}/sessions/{id}/end`` (the server answers 202 and distills in the background). With ``COFFER_API_URL`` set, SessionStart asks the
REST app for the bundle too (``COFFER_API_TOKEN`` is sent as a bearer token). For Codex, which
has no SessionEnd event, SessionStart also starts a bounded background sweep of past sessions at
most once every ``COFFER_HOOK_SWEEP_INTERVAL`` seconds (default 6 hours). A SessionStart of an
agent whose earlier session ends were left ``in_progress`` (``logs/left-<agent>.mark``) hands them
to a detached process too (``pick_up_left``; with ``COFFER_API_URL``, the server is asked to).

In a repository that opted out (``.coffer-optout``, or ``[projects] exclude``; see
``coffer_memory._optout``) both events do nothing: no bundle is printed, nothing is distilled,
no sweep starts.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from types import FrameType
from typing import Any, NamedTuple
from urllib.parse import quote

from .._home import HomeLayout
from .._interrupt import ready
from .._jsontext import loads as json_loads
from .given import RESUME, inherit_given, load_given, save_given, save_root_given, to_give

DEFAULT_DEADLINE_SECONDS = 3.0
MAX_STDIN_BYTES = 1 << 20
LOG_MAX_BYTES = 512 * 1024
LOG_BACKUPS = 2
# Codex has no SessionEnd hook: its past sessions are swept (bounded) from SessionStart instead.
SWEEP_AT_START = frozenset({"codex"})
SWEEP_INTERVAL_SECONDS = 6 * 3600
SWEEP_LIMIT = 5
AGENT_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.")
# Written out rather than built with argparse: every session start pays for this module's imports.
USAGE = """\
usage: coffer-hook --agent AGENT [--home HOME]

The command an agent's session hooks run (installed by `coffer agents install AGENT`). It reads
the agent's JSON payload on stdin: SessionStart prints the session-context bundle, SessionEnd
hands the session to distillation. It never fails the agent: problems go to HOME/logs/hook.log.

options:
  -h, --help     show this help message and exit
  --agent AGENT  the agent running the hook: claude-code, codex or opencode
  --home HOME    coffer home (default: $COFFER_HOME or ~/.coffer)
"""


class HookError(Exception):
    """Why a hook call produced nothing (logged, never shown to the agent)."""


class _Deadline(BaseException):
    """Raised by the alarm; a BaseException so no ``except Exception`` on the way swallows it."""


def _on_alarm(signum: int, frame: FrameType | None) -> None:
    raise _Deadline()


def coffer_home(explicit: str | None = None) -> Path:
    """``--home``, else ``$COFFER_HOME``, else ``~/.coffer`` (as ``Settings`` resolves it)."""
    from .._home import expand_user

    return Path(os.path.abspath(expand_user(explicit or os.environ.get("COFFER_HOME") or "~/.coffer")))


def _deadline_seconds() -> float:
    try:
        value = float(os.environ.get("COFFER_HOOK_DEADLINE", DEFAULT_DEADLINE_SECONDS))
    except ValueError:
        return DEFAULT_DEADLINE_SECONDS
    return value if value > 0 else DEFAULT_DEADLINE_SECONDS


def read_payload(stream: Any) -> dict[str, Any]:
    """The hook's stdin JSON object (at most 1 MiB)."""
    raw = stream.read(MAX_STDIN_BYTES + 1)
    if len(raw) > MAX_STDIN_BYTES:
        raise HookError("stdin payload larger than 1 MiB")
    try:
        # An integer of more digits than int() converts (a 5,000-digit session_id) made the whole
        # payload "not JSON", and the session started without its rules: it is kept as a marker.
        payload = json_loads(raw or b"null", parse_int=_int_or_long)
    except ValueError as exc:
        raise HookError(f"stdin is not JSON: {exc}") from None
    if not isinstance(payload, dict):
        raise HookError("stdin JSON is not an object")
    return payload


class _LongNumber:
    """A JSON integer of more digits than ``int()`` converts (``sys.get_int_max_str_digits``)."""

    def __init__(self, digits: int) -> None:
        self.digits = digits


def _int_or_long(digits: str) -> int | _LongNumber:
    try:
        return int(digits)
    except ValueError:
        return _LongNumber(len(digits))


def _kind(value: Any) -> str:
    """What a payload value is, in words (never its text: the payload is the agent's)."""
    if isinstance(value, _LongNumber):
        return f"a number of {value.digits} digits"
    if isinstance(value, bool) or value is None:
        return json.dumps(value)
    if isinstance(value, (int, float)):
        return "a number"
    return "an empty string" if value == "" else f"a JSON {type(value).__name__}"


def _field(payload: dict[str, Any], key: str) -> str:
    value = payload.get(key)
    if key not in payload:
        raise HookError(f"stdin JSON has no {key!r}")
    if not isinstance(value, str) or not value:
        raise HookError(f"stdin JSON's {key!r} is {_kind(value)}, not a string")
    return value


def _api(method: str, path: str, body: dict[str, Any] | None, timeout: float) -> Any:
    """One request to the REST app at ``$COFFER_API_URL`` (stdlib client: importing httpx costs ~100 ms)."""
    from urllib.request import Request, urlopen

    base = os.environ["COFFER_API_URL"].rstrip("/")
    headers = {"Accept": "application/json"}
    token = os.environ.get("COFFER_API_TOKEN")
    if token:
        headers["Authorization"] = f"Bearer {token}"
    data = None
    if body is not None or method != "GET":  # the API refuses a POST that is not JSON, even empty
        data = json.dumps(body if body is not None else {}).encode()
        headers["Content-Type"] = "application/json"
    request = Request(base + path, data=data, headers=headers, method=method)
    with urlopen(request, timeout=timeout) as response:
        text = response.read()
    return json.loads(text) if text else None


def opted_out(cwd: str, home: Path) -> bool:
    """Whether the repository holding ``cwd`` opted out of coffer's automation."""
    from .._optout import exclude_patterns, optout_for

    return optout_for(cwd, exclude_patterns(home)) is not None


class Start(NamedTuple):
    """What SessionStart does: the line to print ("" for none) and the bundle the session has
    afterwards, to record under its id (None: nothing to record)."""

    line: str
    bundle: str | None


def session_start(agent: str, payload: dict[str, Any], home: Path, timeout: float) -> Start | None:
    """What to print for SessionStart (see ``given``: a resumed session that has the rules
    already gets nothing, or a note of what changed); None in a repository that opted out."""
    cwd = _field(payload, "cwd")
    if opted_out(cwd, home):
        return None
    if os.environ.get("COFFER_API_URL"):
        answer = _api(
            "GET", f"/api/v1/agents/{agent}/session-context?cwd={quote(cwd, safe='')}", None, timeout
        )
        bundle = answer.get("additional_context") if isinstance(answer, dict) else None
        if not isinstance(bundle, str):
            raise HookError("the REST app answered without additional_context")
    else:
        from .context import session_context

        if home.exists() and not home.is_dir():
            raise HookError(f"COFFER_HOME {home} is not a directory")
        bundle = session_context(home / "memory", cwd)
    session = _session_id(payload)
    source = payload.get("source")
    earlier = load_given(home, agent, session) if session and source == RESUME else None
    text = to_give(source if isinstance(source, str) else None, bundle, earlier)
    recorded = bundle if session else None  # also when nothing is given: it keeps the record in use
    if not text:
        return Start("", recorded)
    output = {"hookSpecificOutput": {"hookEventName": "SessionStart", "additionalContext": text}}
    return Start(json.dumps(output, ensure_ascii=False), recorded)


def _session_id(payload: dict[str, Any]) -> str | None:
    value = payload.get("session_id")
    return value if isinstance(value, str) and value else None


def unrecorded_session(payload: dict[str, Any]) -> HookError | None:
    """Why the session's rules cannot be recorded under its id (a ``session_id`` that is there but
    no string), logged after the rules were given: a resumed session then gets them whole again."""
    if "session_id" not in payload or _session_id(payload) is not None:
        return None
    kind = _kind(payload["session_id"])
    return HookError(
        f"stdin JSON's 'session_id' is {kind}, not a string: the rules were given, not recorded under it"
    )


def record_given(agent: str, payload: dict[str, Any], home: Path, bundle: str) -> None:
    """Record what the session has now; a new session (not a resume) also prunes old records."""
    session = _session_id(payload)
    if session is not None:
        save_given(home, agent, session, bundle, prune=payload.get("source") != RESUME)
        transcript = payload.get("transcript_path")
        save_root_given(home, agent, transcript if isinstance(transcript, str) else None, bundle)


def session_end(agent: str, payload: dict[str, Any], home: Path, timeout: float) -> None:
    """Hand the session to distillation and return at once."""
    session_id = _field(payload, "session_id")
    cwd = _field(payload, "cwd")
    if opted_out(cwd, home):
        return
    body: dict[str, Any] = {"cwd": cwd}
    transcript = payload.get("transcript_path")
    if isinstance(transcript, str) and transcript:
        # A fork's first SessionEnd is the first time coffer sees its id (its start named the
        # parent): it takes the record of the rules its start gave (see ``given``).
        _logged(home, agent, "SessionEnd", inherit_given, home, agent, session_id, transcript)
        if not os.path.isfile(transcript):
            # Not a session: `claude mcp list` and other one-shot commands fire SessionEnd with a
            # transcript that was never written. Nothing to distill, nothing worth a log line.
            return
        body["transcript_path"] = transcript
    if os.environ.get("COFFER_API_URL"):
        _api("POST", f"/api/v1/agents/{agent}/sessions/{quote(session_id, safe='')}/end", body, timeout)
        return
    argv = ["--session-id", session_id, "--cwd", cwd]
    if "transcript_path" in body:
        argv += ["--transcript-path", body["transcript_path"]]
    _detach(home, agent, argv)


def _detach(home: Path, agent: str, extra: list[str]) -> None:
    """Start ``python -m coffer_memory._session_end`` detached: a new session, no inherited
    pipes, so the agent is never kept waiting for it."""
    import subprocess

    argv = [sys.executable, "-m", "coffer_memory._session_end", "--home", str(home), "--agent", agent]
    subprocess.Popen(
        [*argv, *extra],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
        close_fds=True,
    )


def maybe_sweep(agent: str, home: Path, timeout: float) -> bool:
    """For agents without a SessionEnd event (Codex): at most once per ``SWEEP_INTERVAL_SECONDS``,
    start a bounded background sweep of past sessions. True when one was started.

    The stamp file is touched before the sweep starts, so parallel session starts do not all
    start one; the sweep itself is a no-op without a configured model.
    """
    if agent not in SWEEP_AT_START:
        return False
    stamp = HomeLayout(home).sweep_stamp(agent)
    try:
        if time.time() - stamp.stat().st_mtime < _sweep_interval():
            return False
    except FileNotFoundError:
        pass
    stamp.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    stamp.touch(mode=0o600)
    if os.environ.get("COFFER_API_URL"):
        _api("POST", f"/api/v1/agents/{agent}/transcripts/sweep?limit={SWEEP_LIMIT}", None, timeout)
    else:
        _detach(home, agent, ["--sweep", "--limit", str(SWEEP_LIMIT)])
    return True


def pick_up_left(agent: str, payload: dict[str, Any], home: Path, timeout: float) -> bool:
    """When earlier ends of ``agent``'s sessions were left ``in_progress`` (their family still
    being distilled then; ``left_mark`` says so without opening the ledger), start a detached
    process that distils them, as a session end hands over its own session: the start does not
    wait for the model. True when one was started. The mark is taken away first, so parallel
    starts start one; the process marks again what it leaves. With ``COFFER_API_URL`` the server
    holds the ledger and the mark: it is asked (``POST .../sessions/left/pick-up``), answers at once
    (204: nothing left; 202: an operation distils them in the background) and True means asked."""
    session = _session_id(payload)
    if os.environ.get("COFFER_API_URL"):
        body = {"going_on": session} if session else {}
        _api("POST", f"/api/v1/agents/{agent}/sessions/left/pick-up", body, timeout)
        return True
    try:
        os.unlink(HomeLayout(home).left_mark(agent))
    except FileNotFoundError:
        return False
    _detach(home, agent, ["--left", "--settle", "0", *(["--session-id", session] if session else [])])
    return True


def _sweep_interval() -> float:
    try:
        return float(os.environ.get("COFFER_HOOK_SWEEP_INTERVAL", SWEEP_INTERVAL_SECONDS))
    except ValueError:
        return float(SWEEP_INTERVAL_SECONDS)


def log_failure(home: Path, agent: str, event: str, error: BaseException) -> None:
    """One line in ``<home>/logs/hook.log`` (rotated) saying why a hook call failed; never raises."""
    kind = "deadline exceeded" if isinstance(error, _Deadline) else f"{type(error).__name__}: {error}"
    log_line(home, agent, event, kind)


def log_line(home: Path, agent: str, event: str, text: str) -> None:
    """One line in ``<home>/logs/hook.log`` (rotated); never raises."""
    try:
        import logging
        from logging.handlers import RotatingFileHandler

        layout = HomeLayout(home)
        layout.logs.mkdir(mode=0o700, parents=True, exist_ok=True)
        logger = logging.getLogger("coffer_memory.hook")
        if not logger.handlers:
            handler = RotatingFileHandler(layout.hook_log, maxBytes=LOG_MAX_BYTES, backupCount=LOG_BACKUPS)
            handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
            logger.addHandler(handler)
            logger.propagate = False
            logger.setLevel(logging.INFO)
        # The event name comes from the payload: only the two the hook handles are named (a line
        # break in ``hook_event_name`` wrote a forged log line, and its text was logged whole),
        # and the line is escaped, so a failure is one line whatever its text holds.
        shown = event if event in ("SessionStart", "SessionEnd") else ("?" if not event else "other")
        line = f"agent={agent} event={shown} {text}"
        logger.warning("%s", line.encode("unicode_escape").decode("ascii"))
        for each in logger.handlers:
            each.close()
        os.chmod(layout.hook_log, 0o600)
    except Exception:  # the log is best effort; the agent must never see a failure
        pass


def _logged(home: Path, agent: str, event: str, step: Callable[..., object], *args: Any) -> None:
    """Run ``step``; a failure is logged and the hook goes on: the rules are printed already, and a
    missing record only means a resumed session gets them whole."""
    try:
        step(*args)
    except Exception as exc:
        log_failure(home, agent, event, exc)


def _parse_args(argv: Sequence[str]) -> tuple[str, str | None]:
    agent, home = "", None
    args = list(argv)
    while args:
        arg = args.pop(0)
        if arg == "--agent" and args:
            agent = args.pop(0)
        elif arg.startswith("--agent="):
            agent = arg.split("=", 1)[1]
        elif arg == "--home" and args:
            home = args.pop(0)
        elif arg.startswith("--home="):
            home = arg.split("=", 1)[1]
    return agent, home


def run(argv: Sequence[str], stdin: Any, stdout: Any) -> int:
    """Handle one hook call; always returns 0."""
    if "-h" in argv or "--help" in argv:
        stdout.write(USAGE)
        return 0
    agent, home_arg = _parse_args(argv)
    home = coffer_home(home_arg)
    event = ""
    deadline = _deadline_seconds()
    previous = signal.signal(signal.SIGALRM, _on_alarm)
    signal.setitimer(signal.ITIMER_REAL, deadline)
    try:
        if not agent or not set(agent) <= AGENT_NAME_CHARS:
            raise HookError("usage: coffer-hook --agent <name> (a plain agent name)")
        payload = read_payload(stdin)
        event = str(payload.get("hook_event_name") or "")
        timeout = max(deadline - 0.5, 0.5)
        if event == "SessionStart":
            start = session_start(agent, payload, home, timeout)
            if start is not None:
                if start.line:
                    signal.setitimer(signal.ITIMER_REAL, 0)
                    stdout.write(start.line + "\n")
                    stdout.flush()
                    signal.setitimer(signal.ITIMER_REAL, deadline)
                if start.bundle is not None:
                    _logged(home, agent, event, record_given, agent, payload, home, start.bundle)
                odd = unrecorded_session(payload)
                if odd is not None:
                    log_failure(home, agent, event, odd)
                maybe_sweep(agent, home, timeout)
                pick_up_left(agent, payload, home, timeout)
        elif event == "SessionEnd":
            session_end(agent, payload, home, timeout)
        else:
            # Not its text: the payload is the agent's, and the log is no place for what it holds.
            raise HookError(f"unsupported hook event ({len(event)} characters)")
    except (Exception, _Deadline) as exc:
        log_failure(home, agent, event, exc)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    return 0


def main() -> int:
    """Console entry point of ``coffer-hook``."""
    try:
        ready()  # from here a Ctrl-C is the KeyboardInterrupt below (before, _coffer_scripts' exit 0)
        return run(sys.argv[1:], sys.stdin.buffer, sys.stdout)
    except BaseException:  # even KeyboardInterrupt: the agent must see exit 0 and no output
        return 0

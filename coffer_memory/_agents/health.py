"""What the agent will really get from coffer's entries, beyond "the entry is in the file".

- ``registered_mcp``: the argv and env of the MCP entry as registered (what the agent starts);
- ``check_registered_mcp``: start it and ask ``initialize`` + ``tools/list`` (``probe``);
- ``hook_review``: for agents that run a hook only once the user trusted it (Codex), that state;
- ``installed_home``: the coffer home the installed entries point at, so a status taken from
  another home compares against the right commands instead of calling them out of date.
"""

from __future__ import annotations

import copy
import os
import shlex
import threading
from collections.abc import Mapping, Sequence
from concurrent.futures import Future
from pathlib import Path

from .._config import DEFAULT_HOME
from .._errors import AgentConfigInvalid
from .._home import expand_user
from .codex_trust import HookTrust, hook_trust
from .homes import AgentHomes
from .install import AgentStatus, EditSession, describe_entry
from .keypaths import get_key
from .probe import DEFAULT_TIMEOUT_SECONDS, MCP_EXTRA_COMMAND, McpCheck, check_mcp_server, mcp_sdk_problem
from .registry import AgentRecord, AgentRegistry
from .specs import (
    HOOK_SCRIPT,
    MCP_SCRIPT,
    AgentSpec,
    Commands,
    Launch,
    Setting,
    agent_spec,
    is_coffer_hook,
    script_path,
)

__all__ = [
    "CheckCache",
    "build_status",
    "check_registered_mcp",
    "hook_review",
    "installed_home",
    "registered_mcp",
]

EXPECTED_TOOL = "coffer__recall"


def _mcp_setting(spec: AgentSpec) -> Setting:
    """The setting that registers coffer's MCP entry (the first ``mcp`` one)."""
    return next(s for s in spec.install if s.part == "mcp")


def registered_mcp(spec: AgentSpec, session: EditSession) -> Launch | None:
    """The registered coffer MCP entry's argv and env (``None`` when there is none)."""
    setting = _mcp_setting(spec)
    doc = session.doc(setting.file(session.homes))
    found, value = get_key(doc.data, setting.path)
    if not found:
        return None
    value = doc.plain(value)
    return spec.mcp_launch(value) if setting.ours is None or setting.ours(value) else None


class CheckCache:
    """The checks of one call, by argv and env: agents that run the same server share one check,
    also when their statuses are built at the same time (the first asks, the others wait for it)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._checks: dict[tuple[tuple[str, ...], tuple[tuple[str, str], ...]], Future[McpCheck]] = {}

    def check(self, argv: Sequence[str], env: Mapping[str, str], timeout: float) -> McpCheck:
        """The check of this server, made now unless it was made (or is being made) already."""
        key = (tuple(argv), tuple(sorted(env.items())))
        with self._lock:
            future = self._checks.get(key)
            ours = future is None
            if future is None:
                future = self._checks[key] = Future()
        if ours:
            try:
                future.set_result(check_mcp_server(argv, env, timeout=timeout))
            except BaseException as exc:  # check_mcp_server reports failures; this is a bug's way out
                future.set_exception(exc)
        return future.result()


def check_registered_mcp(
    spec: AgentSpec,
    session: EditSession,
    timeout: float = DEFAULT_TIMEOUT_SECONDS,
    cache: CheckCache | None = None,
) -> McpCheck | None:
    """Start the registered MCP server as the agent would; ``None`` when nothing is registered."""
    launch = registered_mcp(spec, session)
    if launch is None:
        return None
    argv, env = launch
    check = (CheckCache() if cache is None else cache).check(argv, env, timeout)
    if check.ok and EXPECTED_TOOL not in check.tools:
        return McpCheck(
            check.command,
            ok=False,
            problem=f"the server answers but does not offer {EXPECTED_TOOL} (is it coffer's?)",
            server=check.server,
            tools=check.tools,
            seconds=check.seconds,
        )
    return check


def hook_review(spec: AgentSpec, session: EditSession) -> tuple[HookTrust, ...]:
    """The agent's review state of coffer's hooks (empty for agents without a review step)."""
    if spec.hooks is None or spec.hooks.review_file is None:
        return ()
    hooks_file = spec.hooks.file(session.homes)
    events = tuple(event for event, _ in spec.hooks.events)
    review = session.doc(spec.hooks.review_file(session.homes))
    return tuple(hook_trust(hooks_file, session.doc(hooks_file), review, events, is_coffer_hook))


def _home_option(command: str) -> str | None:
    try:
        words = shlex.split(command)
    except ValueError:
        return None
    for i, word in enumerate(words):
        if word == "--home" and i + 1 < len(words):
            return words[i + 1]
        if word.startswith("--home="):
            return word.split("=", 1)[1]
    return None


def _coffer_hooks(spec: AgentSpec, session: EditSession) -> list[dict[str, str]]:
    if spec.hooks is None:
        return []
    _, events = get_key(session.doc(spec.hooks.file(session.homes)).data, ("hooks",))
    return [
        hook
        for groups in (events.values() if isinstance(events, dict) else ())
        for group in (groups if isinstance(groups, list) else ())
        for hook in (group.get("hooks", []) if isinstance(group, dict) else ())
        if is_coffer_hook(hook)
    ]


def installed_home(spec: AgentSpec, session: EditSession) -> Path | None:
    """The coffer home coffer's installed entries point at (``None`` when nothing is installed).

    An entry without ``--home`` / ``COFFER_HOME`` uses the default home, ``~/.coffer``.
    """
    launch = registered_mcp(spec, session)
    hooks = _coffer_hooks(spec, session)
    if launch is None and not hooks:
        return None
    explicit = launch[1].get("COFFER_HOME") if launch is not None else None
    for hook in hooks:
        explicit = explicit or _home_option(hook["command"])
    return Path(os.path.abspath(expand_user(explicit or DEFAULT_HOME)))


def build_status(
    name: str,
    homes: AgentHomes,
    current_home: Path,
    *,
    check_mcp: bool = False,
    timeout: float = DEFAULT_TIMEOUT_SECONDS,
    cache: CheckCache | None = None,
) -> AgentStatus:
    """Where coffer's integration with ``name`` stands, read from the agent's files.

    "Up to date" is judged against the home the installed entries point at (and that home's
    ``agents.json``), so a status taken with another ``--home`` does not call them stale; a note
    says which home they use. Nothing is written: the install run here is a dry run.
    """
    spec = agent_spec(name)
    current_home = Path(os.path.abspath(current_home))
    notes = list(spec.notes)
    reader = EditSession(homes, AgentRecord(), Commands.of(name, current_home))
    home: Path | None = None
    review: tuple[HookTrust, ...] = ()
    check: McpCheck | None = None
    launch: Launch | None = None
    hook_commands: list[str] = []
    try:
        home = installed_home(spec, reader)
        review = hook_review(spec, reader)
        launch = registered_mcp(spec, reader)
        hook_commands = [h["command"] for h in _coffer_hooks(spec, reader)]
        notes += _foreign_entry_notes(spec, reader)
        if check_mcp:
            check = check_registered_mcp(spec, reader, timeout, cache)
    except AgentConfigInvalid as exc:
        notes.append(exc.message)
    target = home or current_home
    if target != current_home:
        notes.append(
            f"installed for coffer home {target}, not {current_home}: pass --home {target}, "
            "or install again to switch it"
        )
    record = AgentRegistry(target).load().get(name, AgentRecord())
    # A dry run; forced, so an entry of the user's own is judged (not installed), not refused.
    session = EditSession(homes, copy.deepcopy(record), Commands.of(name, target), force=True)
    hooks = mcp = up_to_date = False
    try:
        hooks = spec.hooks is not None and session.hooks_present(spec.hooks)
        hooks = hooks or (spec.plugin is not None and session.plugin_present(spec.plugin))
        mcp = session.present(_mcp_setting(spec))  # the entry; other "mcp" settings may be the user's
        session.install(spec, mcp=not record.hooks_only)
        session.native_memory(spec, record.disable_native_memory)
        up_to_date = not session.plan()
        notes += session.overrides(spec)
    except AgentConfigInvalid as exc:
        notes.append(exc.message)
    notes += _script_notes(spec)
    notes += _mcp_notes(spec.name, mcp=mcp, hooks_only=record.hooks_only and not mcp)
    installed = (mcp or (record.hooks_only and hooks)) and (hooks or not spec.session_start)
    return AgentStatus(
        name=name,
        label=spec.label,
        installed=installed,
        hooks_supported=spec.session_start,
        hooks_installed=hooks,
        mcp_registered=mcp,
        native_memory_supported=bool(spec.native_memory),
        disable_native_memory=record.disable_native_memory,
        up_to_date=installed and up_to_date,
        # What is in the files, not what install would write (an old path shows as it is).
        hook_command=(hook_commands[0] if hook_commands else session.commands.hook) if hooks else None,
        mcp_command=shlex.join(launch[0]) if launch is not None and mcp else None,
        files=spec.files(homes),
        notes=tuple(notes),
        home=home,
        hook_review=review,
        mcp_check=check,
        hooks_only=record.hooks_only and not mcp,
    )


def _foreign_entry_notes(spec: AgentSpec, session: EditSession) -> list[str]:
    """A note when the agent's ``coffer`` MCP entry is the user's own (it runs something else)."""
    setting = _mcp_setting(spec)
    doc = session.doc(setting.file(session.homes))
    found, value = get_key(doc.data, setting.path)
    if not found or setting.ours is None or setting.ours(doc.plain(value)):
        return []
    return [
        f"{doc.path} has a '{setting.path[-1]}' MCP entry of your own (it runs "
        f"{describe_entry(doc.plain(value))}): `coffer agents install {spec.name} --force` replaces it, "
        "and `coffer agents uninstall` puts it back"
    ]


def _mcp_notes(name: str, *, mcp: bool, hooks_only: bool) -> list[str]:
    """Why coffer's MCP server is left out, or cannot start from this Python (no SDK here)."""
    problem = mcp_sdk_problem()
    if hooks_only:  # the extra's command only where it is missing
        then = f"{MCP_EXTRA_COMMAND}, then " if problem is not None else ""
        then += f"`coffer agents install {name}`"
        return [f"session hooks only: coffer's MCP server is not registered (to add it: {then})"]
    if mcp and problem is not None:
        return [f"{problem}, so the registered coffer-mcp cannot start: {MCP_EXTRA_COMMAND}"]
    return []


def _script_notes(spec: AgentSpec) -> list[str]:
    scripts = [HOOK_SCRIPT, MCP_SCRIPT] if spec.session_start else [MCP_SCRIPT]
    return [
        f"{script} is not installed at {path}: reinstall coffer-memory"
        for script in scripts
        if not os.access(path := script_path(script), os.X_OK)
    ]

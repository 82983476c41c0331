"""What each agent gets from coffer, as data: the commands, files, keys and values per agent.

The agents differ only here (``SPECS``); ``install`` applies these specs to the agent's files.
"""

from __future__ import annotations

import os
import shlex
import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

import attrs

from .._config import DEFAULT_HOME, read_config_file
from .._errors import InvalidInput, safe_echo
from .._home import expand_user
from .homes import AGENTS, CLAUDE_CODE, CODEX, OPENCODE, AgentHomes
from .opencode_plugin import PLUGIN_FILENAME, render_plugin
from .registry import KeyPath

HOOK_SCRIPT = "coffer-hook"
MCP_SCRIPT = "coffer-mcp"
MCP_SERVER_NAME = "coffer"
CODEX_CONFIG = "config.toml"
"""Codex's config file, in ``$CODEX_HOME`` and in a project's ``.codex/`` (not coffer's own)."""
HOOK_TIMEOUT_SECONDS = 10
"""The agent kills a hook after this long; coffer-hook keeps its own, shorter deadline."""

Part = Literal["hooks", "mcp", "native_memory"]


# -- commands ----------------------------------------------------------------------------------
def script_path(name: str) -> Path:
    """The absolute path of one of coffer's console scripts.

    The one next to the running interpreter comes first, so an agent runs the scripts of the
    environment coffer was installed into; then ``PATH``. When neither has it, the path next to
    the interpreter is still returned (status then says it is missing).
    """
    # abspath, not resolve: a venv's python is a symlink to the system one, whose bin has no scripts.
    beside = Path(os.path.abspath(sys.executable)).parent / name
    if beside.exists():
        return beside
    found = shutil.which(name)
    return Path(os.path.abspath(found)) if found else beside


def _home_override(home: Path | None) -> Path | None:
    """``home`` when it is not the default one, which an agent's process would not find by itself."""
    if home is None:
        return None
    home = Path(os.path.abspath(home))
    return None if home == Path(os.path.abspath(expand_user(DEFAULT_HOME))) else home


def _check_agent(agent: str) -> None:
    if agent not in AGENTS:
        raise InvalidInput(
            f"unknown agent {safe_echo(agent)!r}: known agents are {', '.join(AGENTS)}",
            field="agent",
            known=list(AGENTS),
        )


def hook_command(agent: str, home: Path | None = None) -> str:
    """The shell command an agent runs for coffer's hook: ``/abs/coffer-hook --agent <agent>``.

    The agent name is baked in because the hook's stdin does not say which agent runs it. With a
    ``home`` other than the default, ``--home <home>`` is added so the hook reads the same store.
    Quoted for the shell (hook commands are run by a shell).
    """
    _check_agent(agent)
    words = [str(script_path(HOOK_SCRIPT)), "--agent", agent]
    override = _home_override(home)
    if override is not None:
        words += ["--home", str(override)]
    return shlex.join(words)


def mcp_command() -> str:
    """The absolute path of ``coffer-mcp`` (run with no arguments: stdio transport)."""
    return str(script_path(MCP_SCRIPT))


def mcp_env(home: Path | None = None) -> dict[str, str]:
    """The environment of coffer's MCP entry: ``COFFER_HOME`` when ``home`` is not the default."""
    override = _home_override(home)
    return {"COFFER_HOME": str(override)} if override is not None else {}


def forwarded_env(home: Path | None = None) -> tuple[str, ...]:
    """The environment variables coffer-mcp reads that an agent must pass on to it by name.

    Codex starts an MCP server with a few variables only (``HOME``, ``PATH``, ``LANG``, ...), not
    its own environment, so the API keys named by ``[embedding] api_key_env`` and ``[llm]
    api_key_env`` in ``home``'s config.toml would be missing there; its ``env_vars`` passes them.
    """
    try:
        config = read_config_file(expand_user(home if home is not None else DEFAULT_HOME))
    except InvalidInput:  # a broken config.toml: coffer-mcp reports it itself
        return ()
    names = set()
    for section in ("embedding", "llm"):
        table = config.get(section)
        name = table.get("api_key_env") if isinstance(table, dict) else None
        if isinstance(name, str) and name:
            names.add(name)
    return tuple(sorted(names))


def is_coffer_hook(entry: object) -> bool:
    """Whether a hook entry is coffer's: its command's first word has the basename ``coffer-hook``."""
    if not isinstance(entry, dict) or not isinstance(entry.get("command"), str):
        return False
    try:
        words = shlex.split(entry["command"])
    except ValueError:  # unbalanced quotes: some user's command, not ours
        return False
    return bool(words) and os.path.basename(words[0]) == HOOK_SCRIPT


def _is_coffer_mcp(value: object) -> bool:
    """Whether an MCP server entry runs ``coffer-mcp`` (``command`` a path, or OpenCode's argv list)."""
    if not isinstance(value, dict):
        return False
    command = value.get("command")
    if isinstance(command, list):
        command = command[0] if command else None
    return isinstance(command, str) and os.path.basename(command) == MCP_SCRIPT


@attrs.frozen
class Commands:
    """What coffer's entries run, for one agent and one coffer home."""

    hook: str
    mcp: str
    env: dict[str, str]
    forward: tuple[str, ...] = ()
    """Variables of the agent's environment the MCP entry passes on by name (Codex's ``env_vars``)."""

    @classmethod
    def of(cls, agent: str, home: Path | None) -> Commands:
        """The commands for ``agent`` with this coffer ``home``."""
        return cls(
            hook=hook_command(agent, home), mcp=mcp_command(), env=mcp_env(home), forward=forwarded_env(home)
        )


# -- what each agent gets ----------------------------------------------------------------------
@attrs.frozen
class Setting:
    """One key coffer sets in an agent's config file (and restores on the way out)."""

    part: Part
    file: Callable[[AgentHomes], Path]
    path: KeyPath
    value: Callable[[Commands], Any]
    ours: Callable[[Any], bool] | None = None
    """Recognises a value coffer wrote (maybe from another install): it is replaced, never restored."""
    unless: tuple[KeyPath, ...] = ()
    """The setting is left out when the user already set any of these keys."""
    otherwise: str = ""
    """What the user's own value of an ``unless`` key means for coffer (said by ``agents status``)."""
    owns: tuple[str, ...] | None = None
    """For an entry (a table): the keys coffer writes. The user's other keys in coffer's entry
    (Codex's ``startup_timeout_sec``, ``enabled_tools``, OpenCode's ``timeout``, ...) are kept by
    install and do not make it "out of date"; ``None``: the whole value is coffer's."""


@attrs.frozen
class HookSpec:
    """Where an agent's hooks live and the events coffer hooks (each with its matcher)."""

    file: Callable[[AgentHomes], Path]
    events: tuple[tuple[str, str], ...]
    review_file: Callable[[AgentHomes], Path] | None = None
    """Where the agent records the user's review of each hook (Codex: ``config.toml``), if it has one."""


@attrs.frozen
class PluginSpec:
    """A whole file coffer owns in an agent's config: a plugin that runs ``coffer-hook`` (OpenCode).

    It stands in for the session hooks of agents that run plugins rather than shell hooks.
    """

    file: Callable[[AgentHomes], Path]
    render: Callable[[Commands], str]


Launch = tuple[list[str], dict[str, str]]
"""An MCP entry's argv and the environment the agent adds for it."""


@attrs.frozen
class AgentSpec:
    """Everything coffer changes for one agent."""

    name: str
    label: str
    hooks: HookSpec | None
    install: tuple[Setting, ...]
    native_memory: tuple[Setting, ...]
    mcp_launch: Callable[[Any], Launch | None]
    """The argv and env of a registered MCP entry (``None`` when the entry cannot be read as one)."""
    notes: tuple[str, ...] = ()
    plugin: PluginSpec | None = None
    """The plugin file that gives the agent coffer's session-start bundle (instead of ``hooks``)."""

    @property
    def session_start(self) -> bool:
        """Whether the agent gets coffer's session-start bundle (by hooks or by a plugin)."""
        return self.hooks is not None or self.plugin is not None

    def files(self, homes: AgentHomes) -> tuple[Path, ...]:
        """Every config file this integration may edit."""
        paths = [self.hooks.file(homes)] if self.hooks else []
        paths += [self.plugin.file(homes)] if self.plugin else []
        paths += [s.file(homes) for s in (*self.install, *self.native_memory)]
        return tuple(dict.fromkeys(paths))


SESSION_START = ("SessionStart", "startup|resume|clear|compact")
SESSION_END = ("SessionEnd", "clear|logout|prompt_input_exit|other")
# Claude Code 2.1.332 starts a fork (``--fork-session``) with its own source, ``fork``, and ends a
# session left for another (``/resume``) with the reason ``resume``: without them in the matchers
# coffer's hooks did not run for either. Codex keeps its matcher: its review hashes it, and a new
# one would undo the user's trust.
CLAUDE_SESSION_START = ("SessionStart", "startup|resume|clear|compact|fork")
CLAUDE_SESSION_END = ("SessionEnd", "clear|resume|logout|prompt_input_exit|other")
EARLIER_MATCHERS = {"SessionStart": (SESSION_START[1],), "SessionEnd": (SESSION_END[1],)}
"""The matchers earlier installs wrote: a group holding only coffer's entry under one of them gets
the current matcher on install (a matcher the user chose is kept)."""


def _claude_settings(h: AgentHomes) -> Path:
    return h.claude / "settings.json"


def _codex_config(h: AgentHomes) -> Path:
    return h.codex / CODEX_CONFIG


def _claude_mcp(c: Commands) -> dict[str, Any]:
    return {"type": "stdio", "command": c.mcp, "args": [], "env": dict(c.env)}


def _codex_mcp(c: Commands) -> dict[str, Any]:
    entry: dict[str, Any] = {"command": c.mcp, "args": [], **({"env": dict(c.env)} if c.env else {})}
    # Codex passes a server only the variables named here (the others run with their own env).
    return {**entry, "env_vars": list(c.forward)} if c.forward else entry


def _opencode_mcp(c: Commands) -> dict[str, Any]:
    entry: dict[str, Any] = {"type": "local", "command": [c.mcp], "enabled": True}
    return {**entry, "environment": dict(c.env)} if c.env else entry


def _opencode_plugin(c: Commands) -> str:
    return render_plugin(c.hook, HOOK_TIMEOUT_SECONDS)


def _str_map(value: Any) -> dict[str, str] | None:
    if value is None:
        return {}
    if isinstance(value, dict) and all(isinstance(v, str) for v in value.values()):
        return {str(k): v for k, v in value.items()}
    return None


def _launch_command_args(entry: Any) -> Launch | None:
    """Claude Code / Codex: ``command`` (a path) + ``args`` + ``env``."""
    if not isinstance(entry, dict) or not isinstance(entry.get("command"), str):
        return None
    args, env = entry.get("args") or [], _str_map(entry.get("env"))
    if not isinstance(args, list) or not all(isinstance(a, str) for a in args) or env is None:
        return None
    return [entry["command"], *args], env


def _launch_opencode(entry: Any) -> Launch | None:
    """OpenCode: ``command`` is the whole argv, ``environment`` the env."""
    if not isinstance(entry, dict) or not isinstance(entry.get("command"), list):
        return None
    argv, env = entry["command"], _str_map(entry.get("environment"))
    if not argv or not all(isinstance(a, str) for a in argv) or env is None:
        return None
    return list(argv), env


def _false(_: Commands) -> bool:
    return False


def _true(_: Commands) -> bool:
    return True


SPECS: dict[str, AgentSpec] = {
    CLAUDE_CODE: AgentSpec(
        name=CLAUDE_CODE,
        label="Claude Code",
        hooks=HookSpec(_claude_settings, (CLAUDE_SESSION_START, CLAUDE_SESSION_END)),
        install=(
            # User scope: top-level mcpServers of ~/.claude.json, what `claude mcp add -s user` writes.
            Setting(
                "mcp",
                lambda h: h.claude_json,
                ("mcpServers", MCP_SERVER_NAME),
                _claude_mcp,
                _is_coffer_mcp,
                owns=("type", "command", "args", "env"),
            ),
        ),
        native_memory=(Setting("native_memory", _claude_settings, ("autoMemoryEnabled",), _false),),
        mcp_launch=_launch_command_args,
    ),
    CODEX: AgentSpec(
        name=CODEX,
        label="Codex",
        # Codex has no SessionEnd; it runs a hook only once the user trusted it (codex_trust.py).
        hooks=HookSpec(lambda h: h.codex / "hooks.json", (SESSION_START,), review_file=_codex_config),
        install=(
            # On by default in recent builds; written only when the user has not set it (either
            # spelling), so an explicit `hooks = false` is respected and reported by status.
            Setting(
                "hooks",
                _codex_config,
                ("features", "hooks"),
                _true,
                unless=(("features", "hooks"), ("features", "codex_hooks")),
                otherwise="while it is false Codex runs no hooks, coffer's SessionStart included",
            ),
            Setting(
                "mcp",
                _codex_config,
                ("mcp_servers", MCP_SERVER_NAME),
                _codex_mcp,
                _is_coffer_mcp,
                owns=("command", "args", "env", "env_vars"),
            ),
        ),
        native_memory=(
            Setting("native_memory", _codex_config, ("features", "memories"), _false),
            Setting("native_memory", _codex_config, ("memories", "generate_memories"), _false),
        ),
        mcp_launch=_launch_command_args,
    ),
    OPENCODE: AgentSpec(
        name=OPENCODE,
        label="OpenCode",
        hooks=None,
        install=(
            Setting(
                "mcp",
                lambda h: h.opencode_config / "opencode.json",
                ("mcp", MCP_SERVER_NAME),
                _opencode_mcp,
                _is_coffer_mcp,
                owns=("type", "command", "enabled", "environment"),
            ),
        ),
        native_memory=(),
        mcp_launch=_launch_opencode,
        # OpenCode runs JavaScript plugins, not shell hooks: the plugin runs coffer-hook for it.
        plugin=PluginSpec(lambda h: h.opencode_config / "plugins" / PLUGIN_FILENAME, _opencode_plugin),
    ),
}


def agent_spec(name: str) -> AgentSpec:
    """The spec of a known agent; ``InvalidInput`` (naming the known agents) otherwise."""
    _check_agent(name)
    return SPECS[name]

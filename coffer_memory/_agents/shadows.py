"""Project-level MCP entries named ``coffer`` that take the place of coffer's user-level entry.

``coffer agents install`` registers coffer-mcp at user level, but each agent lets a project
define a server of the same name, and that definition wins inside the project:

- Claude Code: a local-scope entry (``projects["<dir>"].mcpServers`` of ``.claude.json``, what
  ``claude mcp add coffer -- coffer-mcp`` writes by default) or a ``.mcp.json`` server not refused
  in ``disabledMcpjsonServers`` (``claude -p`` runs it even unapproved, 2.1.332);
- Codex: ``[mcp_servers.coffer]`` in ``.codex/config.toml`` of a trusted project;
- OpenCode: ``mcp.coffer`` in a project ``opencode.json(c)`` or ``.opencode/opencode.json(c)``,
  merged over the global entry.

Such an entry, left from registering coffer by hand or from an old environment, makes the agent
run another command (or none) in that project while ``coffer agents status`` checked coffer's own.
These are read-only lookups: coffer never edits project files.
"""

from __future__ import annotations

import json
import os
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs

from .._errors import AgentConfigInvalid
from .._scope import find_git
from .config_files import load_doc
from .homes import CLAUDE_CODE, CODEX, OPENCODE, AgentHomes
from .specs import CODEX_CONFIG, MCP_SERVER_NAME, agent_spec


@attrs.frozen
class McpShadow:
    """A project-level ``coffer`` MCP entry the agent uses instead of coffer's own in a project."""

    file: Path
    where: str
    """Which of the agent's layers holds it, e.g. "local scope for /src/app"."""
    command: str | None
    """What it runs, or None when it runs nothing (disabled, or a remote server)."""

    def describe(self, label: str, project: str | os.PathLike[str] | None = None) -> str:
        """One line for ``coffer agents status`` (``coffer doctor`` names the ``project``): what
        wins and how to fix it."""
        runs = f"runs {self.command}" if self.command else "runs no coffer-mcp (disabled or remote)"
        where = "this project" if project is None else os.fspath(project)
        return (
            f"in {where} {label} uses the '{MCP_SERVER_NAME}' MCP entry of {self.file} "
            f"({self.where}) instead of coffer's: it {runs}; remove that entry to use coffer's"
        )


def _dirs(cwd: Path) -> list[Path]:
    """``cwd`` and its parents up to its checkout's top (``cwd`` alone outside git), nearest first."""
    start = Path(os.path.realpath(cwd))
    git = find_git(start)
    if git is None:
        return [start]
    out = [start]
    while out[-1] != git.worktree and out[-1].parent != out[-1]:
        out.append(out[-1].parent)
    return out


def _load_json(path: Path, *, comments: bool = False) -> Any:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    try:
        return json.loads(_strip_jsonc(text) if comments else text)
    except ValueError:
        return None  # the agent reports its own broken files; this is only a hint


def _strip_jsonc(text: str) -> str:
    """JSON with ``//`` and ``/* */`` comments and trailing commas (OpenCode's .jsonc) as JSON."""
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            out.append(text[i : j + 1])
            i = j + 1
        elif text.startswith("//", i):
            i = text.find("\n", i) if "\n" in text[i:] else n
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            i = n if end < 0 else end + 2
        elif ch in "}]":
            # a trailing comma before a closing bracket
            k = len(out) - 1
            while k >= 0 and out[k].isspace():
                k -= 1
            if k >= 0 and out[k] == ",":
                del out[k]
            out.append(ch)
            i += 1
        else:
            out.append(ch)
            i += 1
    return "".join(out)


def _command(agent: str, entry: object) -> str | None:
    launch = agent_spec(agent).mcp_launch(entry)
    if launch is None:
        return None
    argv, env = launch
    prefix = "".join(f"{k}={v} " for k, v in sorted(env.items()))
    return prefix + " ".join(argv)


def _differs(agent: str, entry: object, own: object) -> bool:
    spec = agent_spec(agent)
    return spec.mcp_launch(entry) is None or spec.mcp_launch(entry) != spec.mcp_launch(own)


def _lists_coffer(layer: object, key: str) -> bool:
    names = layer.get(key) if isinstance(layer, dict) else None
    return isinstance(names, list) and MCP_SERVER_NAME in names


def _approved(layers: list[object]) -> bool:
    """Whether any of these Claude Code settings approves the project's ``coffer`` server."""
    return any(
        _lists_coffer(layer, "enabledMcpjsonServers")
        or (isinstance(layer, dict) and layer.get("enableAllProjectMcpServers") is True)
        for layer in layers
    )


def _claude(homes: AgentHomes, dirs: list[Path], cwd: Path) -> Iterator[tuple[Path, str, object]]:
    config = _load_json(homes.claude_json)
    projects = config.get("projects") if isinstance(config, dict) else None
    projects = projects if isinstance(projects, dict) else {}
    # Claude Code keys local scope by the repository's main checkout, for its worktrees too
    # (`claude mcp add` in a worktree writes under the main checkout's path).
    git = find_git(cwd)
    keys = [*dirs, *([git.toplevel] if git is not None and git.toplevel not in dirs else [])]
    for d in keys:  # local scope wins over an approved .mcp.json
        local = projects.get(str(d))
        servers = local.get("mcpServers") if isinstance(local, dict) else None
        if isinstance(servers, dict) and MCP_SERVER_NAME in servers:
            yield homes.claude_json, f"local scope for {d}", servers[MCP_SERVER_NAME]
            return
    # A .mcp.json server (checked: 2.1.332) is refused when a settings layer lists it in
    # disabledMcpjsonServers. Otherwise a session runs it once approved: in the user's settings,
    # the project's .claude/settings.local.json or (in a folder the user trusted, as every
    # interactive session there asks) its shared .claude/settings.json, or (older builds) the
    # project's record in .claude.json; and `claude -p` runs it unapproved ("non_interactive").
    layers = [
        _load_json(homes.claude / "settings.json"),
        *(
            _load_json(d / ".claude" / name)
            for d in keys
            for name in ("settings.local.json", "settings.json")
        ),
        *(projects.get(str(d)) for d in keys),
    ]
    if any(_lists_coffer(layer, "disabledMcpjsonServers") for layer in layers):
        return
    for d in dirs:
        dot_mcp = _load_json(d / ".mcp.json")
        servers = dot_mcp.get("mcpServers") if isinstance(dot_mcp, dict) else None
        if isinstance(servers, dict) and MCP_SERVER_NAME in servers:
            where = (
                "project scope, approved"
                if _approved(layers)
                else "project scope, run by `claude -p` unapproved"
            )
            yield d / ".mcp.json", where, servers[MCP_SERVER_NAME]
            return


def _toml(path: Path) -> dict[str, Any] | None:
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return None


def _codex(homes: AgentHomes, dirs: list[Path], cwd: Path) -> Iterator[tuple[Path, str, object]]:
    user = _toml(homes.codex / CODEX_CONFIG) or {}
    found = user.get("projects")
    projects: dict[str, Any] = found if isinstance(found, dict) else {}
    git = find_git(cwd)
    roots = [*dirs, *([git.toplevel] if git is not None else [])]
    trusted = any(
        isinstance(projects.get(str(d)), dict) and projects[str(d)].get("trust_level") == "trusted"
        for d in roots
    )
    if not trusted:  # Codex ignores the .codex/ folder of a project it does not trust
        return
    for d in dirs:  # the nearest layer wins
        layer = _toml(d / ".codex" / CODEX_CONFIG) or {}
        servers = layer.get("mcp_servers")
        if isinstance(servers, dict) and MCP_SERVER_NAME in servers:
            yield d / ".codex" / CODEX_CONFIG, "trusted project config", servers[MCP_SERVER_NAME]
            return


def _opencode(own: object, dirs: list[Path]) -> Iterator[tuple[Path, str, object]]:
    merged = dict(own) if isinstance(own, dict) else {}
    found: Path | None = None
    # OpenCode merges the project files over the global one, the nearest last.
    for d in reversed(dirs):
        for path in (
            d / "opencode.jsonc",
            d / "opencode.json",
            d / ".opencode" / "opencode.jsonc",
            d / ".opencode" / "opencode.json",
        ):
            config = _load_json(path, comments=True)
            mcp = config.get("mcp") if isinstance(config, dict) else None
            entry = mcp.get(MCP_SERVER_NAME) if isinstance(mcp, dict) else None
            if isinstance(entry, dict):
                merged.update(entry)
                found = path
    if found is not None:
        if merged.get("enabled") is False or merged.get("type", "local") != "local":
            merged = {}
        yield found, "project config, merged over the global one", merged


def _own_entry(agent: str, homes: AgentHomes) -> object:
    """Coffer's user-level MCP entry as the agent's config holds it (None when there is none)."""
    [setting] = [s for s in agent_spec(agent).install if s.part == "mcp"]
    try:
        doc = load_doc(setting.file(homes))
    except AgentConfigInvalid:
        return None
    node: Any = doc.data
    for key in setting.path:
        if not hasattr(node, "get"):
            return None
        node = node.get(key)
    return doc.plain(node) if node is not None else None


def mcp_shadows(agent: str, homes: AgentHomes, cwd: str | os.PathLike[str]) -> tuple[McpShadow, ...]:
    """The project-level entries that replace coffer's user-level MCP entry for a session in ``cwd``.

    Only entries that run something other than coffer's are returned: a project entry identical
    to it changes nothing. Nothing is returned while coffer's entry is not installed."""
    path = Path(cwd)
    own = _own_entry(agent, homes)
    if own is None or not path.is_dir():
        return ()
    dirs = _dirs(path)
    if agent == CLAUDE_CODE:
        found = list(_claude(homes, dirs, path))
    elif agent == CODEX:
        found = list(_codex(homes, dirs, path))
    elif agent == OPENCODE:
        found = list(_opencode(own, dirs))
    else:
        found = []
    return tuple(
        McpShadow(file=file, where=where, command=_command(agent, entry))
        for file, where, entry in found
        if _differs(agent, entry, own)
    )

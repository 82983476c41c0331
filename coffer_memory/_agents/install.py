"""Install, uninstall and inspect coffer's integration with each agent.

An integration has three parts, each a set of edits to the agent's own config files:

* ``hooks``: coffer's session hook entries (Claude Code ``settings.json``, Codex ``hooks.json``:
  the same JSON schema, so one piece of code edits both), plus Codex's hooks feature flag; for
  OpenCode, which runs plugins rather than hooks, a plugin file of coffer's that runs the hook;
* ``mcp``: the ``coffer`` MCP server entry, pointing at ``coffer-mcp`` over stdio;
* ``native_memory``: the agent's own memory switched off (only when asked).

The agents differ only in data (``specs.SPECS``): which file, which key, which value. Every edit goes
through ``EditSession``, which loads each file once, records in ``agents.json`` what it replaced,
and writes each changed file once at the end (atomic, with a ``.bak``). Coffer's hook entries
are recognised by the basename ``coffer-hook`` of the command's first word and its MCP entries by
``coffer-mcp``: nothing else in the files is ever touched.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
from collections import defaultdict
from collections.abc import Iterator, MutableMapping
from pathlib import Path
from typing import Any, Literal

import attrs
from tomlkit.exceptions import TOMLKitError

from .._errors import AgentConfigInvalid, CofferError, StorageFull, StorageNotWritable
from .codex_trust import HookTrust
from .config_files import ConfigDoc, backup_path, load_doc, read_bytes, remove_with_backup, write_atomic
from .homes import AGENTS, AgentHomes
from .probe import McpCheck
from .registry import MAX_ORIGINAL_CHARS, AgentRecord, AgentRegistry, FileRecord, KeyPath, Prior
from .specs import (
    EARLIER_MATCHERS,
    HOOK_SCRIPT,
    HOOK_TIMEOUT_SECONDS,
    MCP_SCRIPT,
    MCP_SERVER_NAME,
    SPECS,
    AgentSpec,
    Commands,
    HookSpec,
    PluginSpec,
    Setting,
    agent_spec,
    hook_command,
    is_coffer_hook,
    mcp_command,
    mcp_env,
    script_path,
)

__all__ = [
    "AGENTS",
    "HOOK_SCRIPT",
    "HOOK_TIMEOUT_SECONDS",
    "MCP_SCRIPT",
    "MCP_SERVER_NAME",
    "SPECS",
    "AgentChange",
    "AgentSpec",
    "AgentStatus",
    "Commands",
    "EditSession",
    "HookSpec",
    "PluginSpec",
    "Setting",
    "agent_spec",
    "hook_command",
    "is_coffer_hook",
    "mcp_command",
    "mcp_env",
    "script_path",
]


# -- results -----------------------------------------------------------------------------------
@attrs.frozen
class AgentStatus:
    """Where coffer's integration with one agent stands, read from the agent's files."""

    name: str
    label: str
    installed: bool
    """Hooks (where the agent has them) and the MCP entry are in place."""
    hooks_supported: bool
    hooks_installed: bool
    mcp_registered: bool
    native_memory_supported: bool
    disable_native_memory: bool
    """The setting kept in ``agents.json``: coffer keeps the agent's own memory switched off."""
    up_to_date: bool
    """Installed, and ``install`` would change nothing (same commands, toggles as configured)."""
    hook_command: str | None
    mcp_command: str
    files: tuple[Path, ...]
    notes: tuple[str, ...]
    home: Path | None = None
    """The coffer home the installed entries point at (``None`` when nothing is installed)."""
    hook_review: tuple[HookTrust, ...] = ()
    """For agents that run a hook only once the user trusted it (Codex): that state, per event."""
    mcp_check: McpCheck | None = None
    """The registered MCP server started and asked for its tools (only when a check was asked for)."""
    hooks_only: bool = False
    """Installed with the session hooks alone (``install_agent(..., hooks_only=True)``): no MCP entry."""

    @property
    def working(self) -> bool:
        """Installed, and nothing known stands in the way: hooks trusted, the MCP server answers."""
        trusted = all(t.state == "trusted" for t in self.hook_review)
        return self.installed and trusted and (self.mcp_check is None or self.mcp_check.ok)


@attrs.frozen
class AgentChange:
    """What an install, uninstall or native-memory change did."""

    agent: str
    action: Literal["install", "uninstall", "native_memory"]
    changed: tuple[Path, ...]
    """The config files written or removed (empty when there was nothing to do)."""
    status: AgentStatus


def _mentions_coffer(raw: bytes | None) -> bool:
    """Whether file bytes name coffer's scripts (so they hold one of coffer's entries)."""
    return raw is not None and (HOOK_SCRIPT.encode() in raw or MCP_SCRIPT.encode() in raw)


def _read_or_none(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except OSError:
        return None


# -- editing -----------------------------------------------------------------------------------
def _keep_users_keys(s: Setting, current: Any, wanted: Any) -> Any:
    """``wanted`` plus the keys the user added to coffer's entry ``current`` (``Setting.owns``)."""
    if s.owns is None or not isinstance(current, dict) or not isinstance(wanted, dict):
        return wanted
    if s.ours is None or not s.ours(current):
        return wanted
    return {**wanted, **{k: v for k, v in current.items() if k not in s.owns}}


def _get(root: Any, path: KeyPath) -> tuple[bool, Any]:
    node = root
    for key in path:
        if not isinstance(node, MutableMapping) or key not in node:
            return False, None
        node = node[key]
    return True, node


def _not_a_table(doc: ConfigDoc, path: KeyPath) -> AgentConfigInvalid:
    return AgentConfigInvalid(str(doc.path), f"'{'.'.join(path)}' is not an object or table")


def _note_created(created: list[KeyPath], path: KeyPath) -> None:
    if path not in created:
        created.append(path)


def _set(doc: ConfigDoc, path: KeyPath, value: Any, created: list[KeyPath]) -> None:
    """Set ``path`` to ``value``, creating (and recording) the containers on the way."""
    node: Any = doc.data
    try:
        for depth, key in enumerate(path[:-1]):
            if key not in node:
                holds_tables = depth < len(path) - 2 or isinstance(value, dict)
                node[key] = doc.new_table(node, holds_tables=holds_tables)
                _note_created(created, path[: depth + 1])
            node = node[key]
            if not isinstance(node, MutableMapping):
                raise _not_a_table(doc, path[: depth + 1])
        node[path[-1]] = doc.make_value(value, node)
    except (TypeError, ValueError, TOMLKitError) as exc:  # a layout tomlkit cannot extend
        raise AgentConfigInvalid(str(doc.path), f"cannot set '{'.'.join(path)}' here ({exc})") from exc


def _delete(root: Any, path: KeyPath) -> None:
    found, parent = _get(root, path[:-1])
    if found and isinstance(parent, MutableMapping) and path[-1] in parent:
        del parent[path[-1]]


def _prune(doc: ConfigDoc, created: list[KeyPath]) -> None:
    """Remove the containers coffer created that are empty now (deepest first)."""
    for path in sorted(created, key=len, reverse=True):
        found, node = _get(doc.data, path)
        if not found:
            created.remove(path)
        elif isinstance(node, MutableMapping | list) and len(node) == 0:
            _delete(doc.data, path)
            created.remove(path)


def _groups(doc: ConfigDoc, event: str) -> Iterator[dict[str, Any]]:
    """The well-formed matcher groups of ``hooks.<event>`` (anything odd is the user's: skipped)."""
    _, groups = _get(doc.data, ("hooks", event))
    for group in groups if isinstance(groups, list) else ():
        if isinstance(group, dict) and isinstance(group.get("hooks"), list):
            yield group


def _container(doc: ConfigDoc, path: KeyPath, kind: type, created: list[KeyPath]) -> Any:
    """The container at ``path`` (a new ``kind`` when missing); refuses a non-container there."""
    found, node = _get(doc.data, path)
    if not found:
        _set(doc, path, kind(), created)
        _note_created(created, path)
        _, node = _get(doc.data, path)
    if not isinstance(node, kind):
        raise AgentConfigInvalid(
            str(doc.path), f"'{'.'.join(path)}' is not {'a list' if kind is list else 'an object'}"
        )
    return node


class EditSession:
    """The edits of one command on one agent's files: load each file once, write each once.

    ``record`` (the agent's entry of ``agents.json``) is updated in place with what was replaced.
    """

    def __init__(self, homes: AgentHomes, record: AgentRecord, commands: Commands) -> None:
        self.homes = homes
        self.record = record
        self.commands = commands
        self.docs: dict[Path, ConfigDoc] = {}
        self.held: dict[Path, bool] = {}
        """Per file: it held coffer's entries when loaded (its bytes must not become a ``.bak``)."""
        self.touched: dict[str, set[Path]] = defaultdict(set)
        self.recorded = False
        """Whether something new was recorded (then agents.json is saved before the files)."""
        self.texts: dict[Path, list[bytes | None]] = {}
        """Whole files coffer owns (plugins): per path, the bytes read and the bytes wanted."""
        self.gone_dirs: list[Path] = []
        """Folders coffer created for a plugin, removed after the plugin when empty."""

    def doc(self, path: Path) -> ConfigDoc:
        """The loaded document of ``path`` (``AgentConfigInvalid`` if it does not parse)."""
        if path not in self.docs:
            doc = self.docs[path] = load_doc(path)
            rec = self.record.files.get(str(path))
            self.held[path] = (rec is not None and not rec.empty) or _mentions_coffer(doc.raw)
        return self.docs[path]

    def file_record(self, doc: ConfigDoc, *, create: bool) -> FileRecord | None:
        """This file's record; a new one keeps the file's current text to restore it exactly."""
        key = str(doc.path)
        if key not in self.record.files and create:
            text = doc.raw.decode("utf-8") if doc.raw is not None else None
            original = text if text is not None and len(text) <= MAX_ORIGINAL_CHARS else None
            self.record.files[key] = FileRecord(existed=doc.raw is not None, original=original)
        return self.record.files.get(key)

    def _edit(self, path: Path, create: bool) -> tuple[ConfigDoc, FileRecord | None, str]:
        doc = self.doc(path)
        return doc, self.file_record(doc, create=create), doc.snapshot()

    def _done(self, part: str, doc: ConfigDoc, before: str) -> None:
        if doc.snapshot() != before:
            self.touched[part].add(doc.path)

    # -- hooks ---------------------------------------------------------------------------------
    def install_hooks(self, spec: HookSpec) -> None:
        """Put coffer's entry under each event: a stale one is updated in place, duplicates go."""
        doc, rec, before = self._edit(spec.file(self.homes), True)
        assert rec is not None
        _container(doc, ("hooks",), dict, rec.created)
        for event, matcher in spec.events:
            groups = _container(doc, ("hooks", event), list, rec.created)
            ours = [(g, h) for g in _groups(doc, event) for h in g["hooks"] if is_coffer_hook(h)]
            if not ours:
                entry = {"type": "command", "command": self.commands.hook, "timeout": HOOK_TIMEOUT_SECONDS}
                groups.append({"matcher": matcher, "hooks": [entry]})
                continue
            # Keep the first where it is (the user may have moved it); fix its command.
            group, first = ours[0]
            first["type"] = "command"
            first["command"] = self.commands.hook
            first.setdefault("timeout", HOOK_TIMEOUT_SECONDS)
            if group["hooks"] == [first] and group.get("matcher") in EARLIER_MATCHERS.get(event, ()):
                group["matcher"] = matcher
            for group, entry in ours[1:]:
                group["hooks"] = [h for h in group["hooks"] if h is not entry]
            groups[:] = [g for g in groups if not (isinstance(g, dict) and g.get("hooks") == [])]
        if not rec.hooks:
            rec.hooks = self.recorded = True
        self._done("hooks", doc, before)

    def remove_hooks(self, spec: HookSpec) -> None:
        """Remove coffer's entries from every event; groups and lists emptied by that go too."""
        doc, rec, before = self._edit(spec.file(self.homes), False)
        root = doc.data.get("hooks")
        events: dict[str, Any] = root if isinstance(root, dict) else {}
        for event in list(events):
            groups = events[event]
            emptied = False
            for group in list(_groups(doc, event)):
                kept = [h for h in group["hooks"] if not is_coffer_hook(h)]
                if len(kept) < len(group["hooks"]):
                    group["hooks"] = kept
                    emptied = emptied or not kept
            if emptied:
                groups[:] = [g for g in groups if not (isinstance(g, dict) and g.get("hooks") == [])]
                if not groups and rec is None:  # no record of what we created: drop what we emptied
                    del events[event]
        if events is root and not events and rec is None and doc.snapshot() != before:
            del doc.data["hooks"]
        if rec is not None:
            rec.hooks = False
            _prune(doc, rec.created)
        self._done("hooks", doc, before)

    def hooks_present(self, spec: HookSpec) -> bool:
        """Whether coffer's entry is under every event of ``spec``."""
        doc = self.doc(spec.file(self.homes))
        return all(
            any(is_coffer_hook(h) for g in _groups(doc, event) for h in g["hooks"])
            for event, _ in spec.events
        )

    # -- plugin files --------------------------------------------------------------------------
    def _text(self, spec: PluginSpec) -> tuple[Path, list[bytes | None]]:
        path = spec.file(self.homes)
        if path not in self.texts:
            raw = read_bytes(path)
            self.texts[path] = [raw, raw]
            rec = self.record.files.get(str(path))
            self.held[path] = (rec is not None and not rec.empty) or _mentions_coffer(raw)
        return path, self.texts[path]

    def install_plugin(self, spec: PluginSpec) -> None:
        """Write coffer's plugin file; a file of that name that is not coffer's is refused, never replaced."""
        path, text = self._text(spec)
        if text[0] is not None and not _mentions_coffer(text[0]):
            raise AgentConfigInvalid(
                str(path), f"is not coffer's plugin (no {HOOK_SCRIPT} in it): move it away"
            )
        rec = self.record.files.get(str(path))
        if rec is None:
            rec = self.record.files[str(path)] = FileRecord(existed=text[0] is not None, original=None)
            if not path.parent.exists():
                rec.created.append((path.parent.name,))  # the folder: removed with the plugin if empty
        if not rec.hooks:
            rec.hooks = self.recorded = True
        text[1] = spec.render(self.commands).encode("utf-8")
        if text[1] != text[0]:
            self.touched["hooks"].add(path)

    def remove_plugin(self, spec: PluginSpec) -> None:
        """Remove coffer's plugin file (and the folder coffer made for it, when that is empty)."""
        path, text = self._text(spec)
        rec = self.record.files.get(str(path))
        if rec is not None:
            rec.hooks = False
            if rec.created:
                self.gone_dirs.append(path.parent)
        if _mentions_coffer(text[0]):  # a file the user put there since is theirs: it stays
            text[1] = None
            self.touched["hooks"].add(path)

    def plugin_present(self, spec: PluginSpec) -> bool:
        """Whether coffer's plugin file is there (current or not)."""
        return _mentions_coffer(self._text(spec)[1][0])

    # -- settings ------------------------------------------------------------------------------
    def apply(self, s: Setting) -> None:
        """Set ``s`` to coffer's value, recording the user's value (or its absence) the first time."""
        doc, rec, before = self._edit(s.file(self.homes), True)
        assert rec is not None
        wanted = s.value(self.commands)
        found, current = _get(doc.data, s.path)
        current = doc.plain(current) if found else None
        wanted = _keep_users_keys(s, current, wanted)
        prior = rec.prior(s.part, s.path)
        if prior is None:
            if any(_get(doc.data, p)[0] for p in s.unless):
                return
            theirs = found and not (s.ours is not None and s.ours(current))
            prior = Prior(s.part, s.path, present=theirs, value=current if theirs else None, wrote=wanted)
            rec.priors.append(prior)
            self.recorded = True
        elif prior.wrote != wanted:
            prior.wrote = wanted
            self.recorded = True
        if not found or current != wanted:
            _set(doc, s.path, wanted, rec.created)
        self._done(s.part, doc, before)

    def restore(self, s: Setting) -> None:
        """Put back what the user had before ``s`` was applied (delete a key coffer added).

        A value the user changed since is theirs and stays. Without a record (``agents.json``
        lost), only a value recognisably coffer's is removed.
        """
        doc, rec, before = self._edit(s.file(self.homes), False)
        found, current = _get(doc.data, s.path)
        current = doc.plain(current) if found else None
        ours = found and s.ours is not None and s.ours(current)
        prior = rec.prior(s.part, s.path) if rec is not None else None
        if prior is None:
            if ours:
                _delete(doc.data, s.path)
        else:
            assert rec is not None
            rec.priors.remove(prior)
            if found and (ours or current == prior.wrote):
                if prior.present:
                    _set(doc, s.path, prior.value, rec.created)
                else:
                    _delete(doc.data, s.path)
        if rec is not None:
            _prune(doc, rec.created)
        self._done(s.part, doc, before)

    def overrides(self, spec: AgentSpec) -> list[str]:
        """Notes on settings left out because the user set them otherwise (and coffer respects that)."""
        notes = []
        for s in spec.install:
            doc = self.doc(s.file(self.homes))
            for key in s.unless:
                found, value = _get(doc.data, key)
                if found and doc.plain(value) != s.value(self.commands):
                    shown = json.dumps(doc.plain(value))
                    note = f"{doc.path} sets {'.'.join(key)} = {shown}: coffer leaves it alone"
                    notes.append(f"{note} ({s.otherwise})" if s.otherwise else note)
        return notes

    def present(self, s: Setting) -> bool:
        """Whether ``s`` holds coffer's value (or, for an entry, any entry recognisably coffer's)."""
        found, current = _get(self.doc(s.file(self.homes)).data, s.path)
        if not found:
            return False
        value = self.doc(s.file(self.homes)).plain(current)
        return s.ours(value) if s.ours is not None else bool(value == s.value(self.commands))

    # -- whole integrations --------------------------------------------------------------------
    def install(self, spec: AgentSpec, *, mcp: bool = True) -> None:
        """Hooks (where the agent has them) and the MCP entry; without ``mcp``, the hooks alone
        (an MCP entry of coffer's already there is removed: it would start a server that cannot run)."""
        if spec.hooks is not None:
            self.install_hooks(spec.hooks)
        if spec.plugin is not None:
            self.install_plugin(spec.plugin)
        for setting in spec.install:
            (self.apply if mcp or setting.part != "mcp" else self.restore)(setting)

    def uninstall(self, spec: AgentSpec) -> None:
        """Undo ``install`` (the native-memory toggles are restored separately)."""
        if spec.hooks is not None:
            self.remove_hooks(spec.hooks)
        if spec.plugin is not None:
            self.remove_plugin(spec.plugin)
        for setting in spec.install:
            self.restore(setting)

    def native_memory(self, spec: AgentSpec, disabled: bool) -> None:
        """Write the toggles (``disabled``) or restore what the user had."""
        for setting in spec.native_memory:
            (self.apply if disabled else self.restore)(setting)

    # -- writing -------------------------------------------------------------------------------
    def plan(self) -> list[tuple[Path, bytes | None]]:
        """Each file to write (``None``: to remove). Drops the records of files coffer has left.

        A file coffer has left entirely gets its original bytes back when the document is the
        same as before the first edit (byte-identical uninstall), and is removed when coffer
        created it and it is empty now.
        """
        out: list[tuple[Path, bytes | None]] = []
        for path, doc in self.docs.items():
            data = doc.render() if doc.changed else doc.raw
            rec = self.record.files.get(str(path))
            if rec is not None and rec.empty:
                del self.record.files[str(path)]
                if rec.existed and rec.original is not None and doc.same_document(rec.original.encode()):
                    data = rec.original.encode("utf-8")
                elif not rec.existed and doc.is_empty():
                    data = None
            if data != doc.raw:
                out.append((path, data))
        for path, (raw, wanted) in self.texts.items():
            rec = self.record.files.get(str(path))
            if rec is not None and rec.empty:
                del self.record.files[str(path)]
            if wanted != raw:
                out.append((path, wanted))
        return out

    def commit(self, registry: AgentRegistry, records: dict[str, AgentRecord]) -> list[Path]:
        """Write the planned files and ``agents.json``; returns the files written or removed.

        When something new was recorded, ``agents.json`` is saved first: a crash in between then
        leaves a record of what to restore, never a changed file nobody can restore.
        """
        plan = self.plan()
        for path, _ in plan:  # every file first: one that cannot be written stops all, none half-done
            _check_writable(path)
        if self.recorded:
            registry.save(records)
        for path, data in plan:
            # A .bak never holds coffer's entries, so restoring one cannot bring them back: bytes
            # that held them are not backed up (the .bak keeps the last version without them), and
            # a .bak that holds them (left by an older coffer) goes.
            backup = not self.held[path]
            try:
                if data is None:
                    remove_with_backup(path, backup=backup)
                else:
                    write_atomic(path, data, backup=backup)
                if not backup and _mentions_coffer(_read_or_none(backup_path(path))):
                    os.unlink(backup_path(path))
            except OSError as exc:
                raise _write_error(path, exc) from exc
        for folder in self.gone_dirs:
            with contextlib.suppress(OSError):  # not empty (the user's plugins): it stays
                folder.rmdir()
        registry.save(records)
        return [path for path, _ in plan]

    def changed_by(self, parts: tuple[str, ...], written: list[Path]) -> list[Path]:
        """The written files that ``parts`` changed, in write order."""
        mine: set[Path] = set().union(*(self.touched[p] for p in parts))
        return [p for p in written if p in mine]


def _check_writable(path: Path) -> None:
    """``StorageNotWritable`` naming ``path`` when this process may not write it (the file, made
    read-only, or its folder, or a read-only file system): it was ``AGENT_CONFIG_INVALID`` (409), as
    if the file did not parse, and raised after the files before it were written."""
    real = Path(os.path.realpath(path))
    folder = real.parent
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    for entry, mode in ((real, os.W_OK), (folder, os.W_OK | os.X_OK)):
        if os.path.exists(entry) and not os.access(entry, mode):
            read_only = os.statvfs(entry).f_flag & os.ST_RDONLY
            reason = "on a read-only file system" if read_only else "not writable by this user"
            where = str(path) if entry == real else f"{path} (its folder {entry})"
            raise StorageNotWritable(where, reason)


def _write_error(path: Path, exc: OSError) -> CofferError:
    """A config file write that failed, typed as a store write is (no permission, a full disk)."""
    reason = exc.strerror or str(exc)
    if exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        return StorageNotWritable(str(path), reason)
    if exc.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG):
        return StorageFull(str(path), reason)
    return AgentConfigInvalid(str(path), f"cannot be written ({reason})")

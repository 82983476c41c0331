"""Install, uninstall and inspect coffer's integration with each agent.

An integration has three parts, each a set of edits to the agent's own config files:

* ``hooks``: coffer's session hook entries (Claude Code ``settings.json``, Codex ``hooks.json``:
  the same JSON schema, so one piece of code edits both), plus Codex's hooks feature flag; for
  OpenCode, which runs plugins rather than hooks, a plugin file of coffer's that runs the hook;
* ``mcp``: the ``coffer`` MCP server entry, pointing at ``coffer-mcp`` over stdio;
* ``native_memory``: the agent's own memory switched off (only when asked).

The agents differ only in data (``specs.SPECS``): which file, which key, which value. Every edit goes
through ``EditSession``, which loads each file once, records in ``agents.json`` what it replaced,
and writes each changed file once at the end (atomic, with a ``.bak`` of a file that held none of
coffer's entries). Coffer's hook entries are recognised by the basename ``coffer-hook`` of the
command's first word and its MCP entries by ``coffer-mcp``: nothing else in the files is ever
touched, and an entry of coffer's name that is the user's own is replaced only when forced.

Uninstall leaves what it found before install: each file's original bytes, no ``.bak`` that only
repeats them (one that differs, because the user changed the file since, stays and is named), and
none of the folders install made, when they are empty.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
from collections import defaultdict
from pathlib import Path
from typing import Any, Literal

import attrs

from .._errors import AgentConfigInvalid
from .codex_trust import HookTrust
from .config_files import (
    ConfigDoc,
    backup_path,
    check_writable,
    legacy_backup_path,
    load_doc,
    read_bytes,
    remove_with_backup,
    write_atomic,
    write_error,
)
from .homes import AGENTS, AgentHomes
from .keypaths import container, delete_key, get_key, hook_groups, keep_users_keys, prune, set_key
from .probe import McpCheck
from .registry import MAX_ORIGINAL_CHARS, AgentRecord, AgentRegistry, FileRecord, Prior
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
    """The hook command installed (the first of coffer's hook entries); ``None`` when there is none."""
    mcp_command: str | None
    """The command coffer's registered MCP entry runs; ``None`` when there is none (``hooks_only``)."""
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
    notes: tuple[str, ...] = ()
    """What the change did beyond writing ``changed``: an entry of the user's replaced (``force``),
    a folder removed, a ``.bak`` kept."""
    kept_backups: tuple[Path, ...] = ()
    """``.bak`` files left beside files coffer has left: each differs from the file restored (the
    user changed it since install), so it is the only copy of what the file was before coffer."""
    removed_folders: tuple[Path, ...] = ()
    """Folders coffer had made for its files, removed because they were left empty."""


def _mentions_coffer(raw: bytes | None) -> bool:
    """Whether file bytes name coffer's scripts (so they hold one of coffer's entries)."""
    return raw is not None and (HOOK_SCRIPT.encode() in raw or MCP_SCRIPT.encode() in raw)


def _read_or_none(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except OSError:
        return None


def missing_folders(path: Path) -> list[str]:
    """The folders above ``path`` that do not exist yet (writing it makes them), outermost first."""
    missing = []
    folder = Path(os.path.abspath(path)).parent
    while not folder.exists() and folder != folder.parent:
        missing.append(str(folder))
        folder = folder.parent
    return missing[::-1]


def describe_entry(value: Any) -> str:
    """What an MCP entry runs (its command line, or its URL), to name it to the user."""
    if isinstance(value, dict):
        command, args = value.get("command"), value.get("args")
        argv = command if isinstance(command, list) else [command, *(args if isinstance(args, list) else [])]
        if argv and all(isinstance(a, str) for a in argv):
            return shlex.join(argv)
        if isinstance(value.get("url"), str):
            return str(value["url"])
    return json.dumps(value, ensure_ascii=False)[:200]


# -- editing -------------------------------------------------------------------------------------
class EditSession:
    """The edits of one command on one agent's files: load each file once, write each once.

    ``record`` (the agent's entry of ``agents.json``) is updated in place with what was replaced.
    """

    def __init__(
        self, homes: AgentHomes, record: AgentRecord, commands: Commands, *, force: bool = False
    ) -> None:
        self.homes = homes
        self.force = force
        """Replace an entry of the user's own where coffer's goes (kept in ``agents.json``: uninstall
        puts it back); without it such an entry is refused."""
        self.notes: list[str] = []
        """What this session did that the user should hear of (replaced entries, kept backups)."""
        self.left: set[Path] = set()
        """Files coffer has left entirely in this session (their records were dropped)."""
        self.kept_backups: list[Path] = []
        self.removed_folders: list[Path] = []
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
            self.record.files[key] = FileRecord(
                existed=doc.raw is not None, original=original, folders=missing_folders(doc.path)
            )
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
        container(doc, ("hooks",), dict, rec.created)
        for event, matcher in spec.events:
            groups = container(doc, ("hooks", event), list, rec.created)
            ours = [(g, h) for g in hook_groups(doc, event) for h in g["hooks"] if is_coffer_hook(h)]
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
            for group in list(hook_groups(doc, event)):
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
            prune(doc, rec.created)
        self._done("hooks", doc, before)

    def hooks_present(self, spec: HookSpec) -> bool:
        """Whether coffer's entry is under every event of ``spec``."""
        doc = self.doc(spec.file(self.homes))
        return all(
            any(is_coffer_hook(h) for g in hook_groups(doc, event) for h in g["hooks"])
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
            folders = missing_folders(path)  # removed with the plugin when left empty
            rec = self.record.files[str(path)] = FileRecord(
                existed=text[0] is not None, original=None, folders=folders
            )
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
            if rec.created:  # an older coffer's record of the folder it made for the plugin
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
        found, current = get_key(doc.data, s.path)
        current = doc.plain(current) if found else None
        wanted = keep_users_keys(s, current, wanted)
        prior = rec.prior(s.part, s.path)
        if prior is None:
            if any(get_key(doc.data, p)[0] for p in s.unless):
                return
            theirs = found and not (s.ours is not None and s.ours(current))
            if theirs and s.ours is not None:  # an entry of that name that is not coffer's
                self._replace_theirs(s, doc.path, current)
            prior = Prior(s.part, s.path, present=theirs, value=current if theirs else None, wrote=wanted)
            rec.priors.append(prior)
            self.recorded = True
        elif found and s.ours is not None and not s.ours(current):
            # Installed before, then made the user's own (pointed at another server): theirs now,
            # as an entry found on a first install is, and what uninstall puts back.
            self._replace_theirs(s, doc.path, current)
            prior.present, prior.value, prior.wrote = True, current, wanted
            self.recorded = True
        elif prior.wrote != wanted:
            prior.wrote = wanted
            self.recorded = True
        if not found or current != wanted:
            set_key(doc, s.path, wanted, rec.created)
        self._done(s.part, doc, before)

    def _replace_theirs(self, s: Setting, path: Path, value: Any) -> None:
        """Refuse to replace the user's own entry at ``s.path``, or (``force``) say that it was."""
        where = f"{path} has a '{s.path[-1]}' entry of its own under {'.'.join(s.path[:-1])}"
        runs = describe_entry(value)
        if not self.force:
            raise AgentConfigInvalid(
                str(path),
                f"{where.removeprefix(f'{path} ')} (it runs {runs}), not coffer's: to replace it, install "
                "again with --force (force=true over REST and Python); uninstall then puts it back",
            )
        self.notes.append(
            f"replaced the '{s.path[-1]}' entry of your own in {path} (it ran {runs}); "
            "it is kept in coffer's agents.json and `coffer agents uninstall` puts it back"
        )

    def restore(self, s: Setting) -> None:
        """Put back what the user had before ``s`` was applied (delete a key coffer added).

        A value the user changed since is theirs and stays. Without a record (``agents.json``
        lost), only a value recognisably coffer's is removed.
        """
        doc, rec, before = self._edit(s.file(self.homes), False)
        found, current = get_key(doc.data, s.path)
        current = doc.plain(current) if found else None
        ours = found and s.ours is not None and s.ours(current)
        prior = rec.prior(s.part, s.path) if rec is not None else None
        if prior is None:
            if ours:
                delete_key(doc.data, s.path)
        else:
            assert rec is not None
            rec.priors.remove(prior)
            if found and (ours or current == prior.wrote):
                if prior.present:
                    set_key(doc, s.path, prior.value, rec.created)
                else:
                    delete_key(doc.data, s.path)
        if rec is not None:
            prune(doc, rec.created)
        self._done(s.part, doc, before)

    def overrides(self, spec: AgentSpec) -> list[str]:
        """Notes on settings left out because the user set them otherwise (and coffer respects that)."""
        notes = []
        for s in spec.install:
            doc = self.doc(s.file(self.homes))
            for key in s.unless:
                found, value = get_key(doc.data, key)
                if found and doc.plain(value) != s.value(self.commands):
                    shown = json.dumps(doc.plain(value))
                    note = f"{doc.path} sets {'.'.join(key)} = {shown}: coffer leaves it alone"
                    notes.append(f"{note} ({s.otherwise})" if s.otherwise else note)
        return notes

    def present(self, s: Setting) -> bool:
        """Whether ``s`` holds coffer's value (or, for an entry, any entry recognisably coffer's)."""
        found, current = get_key(self.doc(s.file(self.homes)).data, s.path)
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
                self._leave(path, rec)
                if rec.existed and rec.original is not None and doc.same_document(rec.original.encode()):
                    data = rec.original.encode("utf-8")
                elif not rec.existed and doc.is_empty():
                    data = None
            if data != doc.raw:
                out.append((path, data))
        for path, (raw, wanted) in self.texts.items():
            rec = self.record.files.get(str(path))
            if rec is not None and rec.empty:
                self._leave(path, rec)
            if wanted != raw:
                out.append((path, wanted))
        return out

    def _leave(self, path: Path, rec: FileRecord) -> None:
        """Coffer has nothing left in ``path``: drop its record, and (once written) its folders."""
        del self.record.files[str(path)]
        self.left.add(path)
        self.gone_dirs += [Path(f) for f in rec.folders]

    def _tidy_backup(self, path: Path, data: bytes | None) -> None:
        """After coffer left ``path`` (now ``data``): its ``.bak`` goes when it holds the very same
        bytes (nothing is lost); one that differs is the only copy of the file before coffer, so
        it stays, and the user is told."""
        bak = backup_path(path)
        kept = _read_or_none(bak)
        if kept is None or _mentions_coffer(kept):
            return
        if kept == data:
            os.unlink(bak)
        elif data is not None:
            self.kept_backups.append(bak)
            self.notes.append(
                f"kept {bak}: {path} as it was before coffer's install; the file differs from it now "
                "(changes made since are kept), so delete the .coffer.bak once you no longer need it"
            )

    def commit(self, registry: AgentRegistry, records: dict[str, AgentRecord]) -> list[Path]:
        """Write the planned files and ``agents.json``; returns the files written or removed.

        When something new was recorded, ``agents.json`` is saved first: a crash in between then
        leaves a record of what to restore, never a changed file nobody can restore.
        """
        plan = self.plan()
        for path, _ in plan:  # every file first: one that cannot be written stops all, none half-done
            check_writable(path)
        if self.recorded:
            registry.save(records)
        for path, data in plan:
            # A .bak never holds coffer's entries, so restoring one cannot bring them back: bytes
            # that held them are not backed up (the .bak keeps the last version without them), and
            # a backup that holds them (left by an older coffer, also under the plain .bak name it
            # used) goes.
            backup = not self.held[path]
            try:
                if data is None:
                    remove_with_backup(path, backup=backup)
                else:
                    write_atomic(path, data, backup=backup)
                stale = (
                    [legacy_backup_path(path)] if backup else [backup_path(path), legacy_backup_path(path)]
                )
                for bak in stale:
                    if _mentions_coffer(_read_or_none(bak)):
                        os.unlink(bak)
                if path in self.left:
                    self._tidy_backup(path, data)
            except OSError as exc:
                raise write_error(path, exc) from exc
        # Deepest first, each once; one not empty (the agent's own files, the user's plugins) stays.
        for folder in sorted(set(self.gone_dirs), key=lambda f: len(f.parts), reverse=True):
            with contextlib.suppress(OSError):
                folder.rmdir()
                self.removed_folders.append(folder)
        registry.save(records)
        return [path for path, _ in plan]

    def changed_by(self, parts: tuple[str, ...], written: list[Path]) -> list[Path]:
        """The written files that ``parts`` changed, in write order."""
        mine: set[Path] = set().union(*(self.touched[p] for p in parts))
        return [p for p in written if p in mine]

"""Coffer's own record of its agent integrations: ``<COFFER_HOME>/agents.json``.

It holds each agent's ``disable_native_memory`` flag and, per agent config file coffer edited,
what is needed to undo the edits exactly:

* ``existed`` and ``original``: whether the file was there before coffer first touched it, and
  its text then (so an uninstall that leaves the same document can put back the very bytes);
* ``created``: the containers (tables, hook event lists) coffer created and prunes when empty;
* ``hooks``: whether coffer's hook entries are in the file (for a plugin file: whether it is
  coffer's plugin);
* ``folders``: the folders coffer made for the file (removed with it when left empty);
* ``priors``: every key coffer set, with the user's value before (or its absence) and what
  coffer wrote, so a restore puts back the user's value and leaves a later user edit alone.

The loader is tolerant: a missing file or key reads as "nothing installed" and ``false``. A file
that is not JSON is an error, never an empty registry: forgetting it would forget what to restore.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import attrs

from .._errors import AgentConfigInvalid
from .._home import AGENTS_JSON
from .._jsontext import loads as json_loads
from .config_files import write_atomic

REGISTRY_FILENAME = AGENTS_JSON
VERSION = 1
MAX_ORIGINAL_CHARS = 4_000_000
"""A config file larger than this is not snapshotted (uninstall then re-renders it instead)."""

KeyPath = tuple[str, ...]

__all__ = ["AgentRecord", "AgentRegistry", "FileRecord", "KeyPath", "Prior"]


@attrs.define
class Prior:
    """One key coffer set in a file: the user's value before it, and what coffer wrote."""

    part: str
    """Which integration part set it: ``hooks``, ``mcp`` or ``native_memory``."""
    path: KeyPath
    present: bool
    """Whether the user had the key (``value`` is theirs) or coffer added it (restore deletes it)."""
    value: Any
    wrote: Any


@attrs.define
class FileRecord:
    """What coffer changed in one agent config file, to undo it exactly."""

    existed: bool
    original: str | None
    created: list[KeyPath] = attrs.field(factory=list)
    hooks: bool = False
    priors: list[Prior] = attrs.field(factory=list)
    folders: list[str] = attrs.field(factory=list)
    """The folders that were missing when coffer first wrote the file (it made them), outermost
    first: uninstall removes those left empty, so a fresh HOME is left as it was."""

    def prior(self, part: str, path: KeyPath) -> Prior | None:
        """The record of ``path`` set by ``part``, if any."""
        return next((p for p in self.priors if p.part == part and p.path == path), None)

    @property
    def empty(self) -> bool:
        """Nothing of coffer's is left in the file."""
        return not self.hooks and not self.priors


@attrs.define
class AgentRecord:
    """One agent's integration state."""

    disable_native_memory: bool = False
    files: dict[str, FileRecord] = attrs.field(factory=dict)
    hooks_only: bool = False
    """Installed with the session hooks alone, on purpose (no MCP entry: the SDK was missing)."""


def _fail(path: Path, reason: str) -> AgentConfigInvalid:
    return AgentConfigInvalid(str(path), reason)


def _key_path(value: Any, where: str, path: Path) -> KeyPath:
    if not isinstance(value, list) or not all(isinstance(k, str) for k in value):
        raise _fail(path, f"{where} is not a list of keys")
    return tuple(value)


def _file_record(raw: Any, where: str, path: Path) -> FileRecord:
    if not isinstance(raw, dict):
        raise _fail(path, f"{where} is not an object")
    original = raw.get("original")
    priors = raw.get("priors", [])
    created = raw.get("created", [])
    if original is not None and not isinstance(original, str):
        raise _fail(path, f"{where}.original is not a string")
    if not isinstance(priors, list) or not isinstance(created, list):
        raise _fail(path, f"{where}: 'priors' and 'created' must be lists")
    record = FileRecord(
        existed=raw.get("existed", True) is not False,
        original=original,
        created=[_key_path(c, f"{where}.created", path) for c in created],
        hooks=raw.get("hooks") is True,
        folders=[str(f) for f in raw.get("folders", []) if isinstance(f, str)]
        if isinstance(raw.get("folders"), list)
        else [],
    )
    for i, p in enumerate(priors):
        if not isinstance(p, dict) or not isinstance(p.get("part"), str):
            raise _fail(path, f"{where}.priors[{i}] is not an object with a 'part'")
        record.priors.append(
            Prior(
                part=p["part"],
                path=_key_path(p.get("path"), f"{where}.priors[{i}].path", path),
                present=p.get("present") is True,
                value=p.get("value"),
                wrote=p.get("wrote"),
            )
        )
    return record


def _dump_record(record: AgentRecord) -> dict[str, Any]:
    return {
        "disable_native_memory": record.disable_native_memory,
        **({"hooks_only": True} if record.hooks_only else {}),
        "files": {
            name: {
                "existed": f.existed,
                "original": f.original,
                "created": [list(c) for c in f.created],
                "hooks": f.hooks,
                "priors": [
                    {
                        "part": p.part,
                        "path": list(p.path),
                        "present": p.present,
                        "value": p.value,
                        "wrote": p.wrote,
                    }
                    for p in f.priors
                ],
                **({"folders": f.folders} if f.folders else {}),
            }
            for name, f in sorted(record.files.items())
            if not f.empty
        },
    }


class AgentRegistry:
    """Load and save ``<home>/agents.json`` (atomic writes, mode 0600)."""

    def __init__(self, home: Path) -> None:
        self.path = home / REGISTRY_FILENAME

    def load(self) -> dict[str, AgentRecord]:
        """Every agent's record; a missing file or key reads as nothing installed and ``false``.

        Raises ``AgentConfigInvalid`` when the file is not a JSON object of the expected shape.
        """
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return {}
        except (OSError, UnicodeDecodeError) as exc:
            raise _fail(self.path, f"cannot be read ({exc})") from exc
        try:
            raw = json_loads(text) if text.strip() else {}
        except json.JSONDecodeError as exc:
            raise _fail(self.path, f"is not valid JSON ({exc.msg}, line {exc.lineno})") from exc
        agents = raw.get("agents", {}) if isinstance(raw, dict) else None
        if not isinstance(agents, dict):
            raise _fail(self.path, "does not hold an object of agents")
        out: dict[str, AgentRecord] = {}
        for name, entry in agents.items():
            if not isinstance(entry, dict):
                raise _fail(self.path, f"agents.{name} is not an object")
            files = entry.get("files", {})
            if not isinstance(files, dict):
                raise _fail(self.path, f"agents.{name}.files is not an object")
            out[name] = AgentRecord(
                disable_native_memory=entry.get("disable_native_memory") is True,
                hooks_only=entry.get("hooks_only") is True,
                files={
                    k: _file_record(v, f"agents.{name}.files[{k!r}]", self.path) for k, v in files.items()
                },
            )
        return out

    def render(self, records: dict[str, AgentRecord]) -> bytes:
        """The file's bytes for ``records`` (agents with nothing to remember are left out)."""
        kept = {
            name: _dump_record(r)
            for name, r in sorted(records.items())
            if r.disable_native_memory or any(not f.empty for f in r.files.values())
        }
        text = json.dumps({"version": VERSION, "agents": kept}, ensure_ascii=False, indent=2)
        return (text + "\n").encode("utf-8")

    def save(self, records: dict[str, AgentRecord]) -> bool:
        """Write ``records`` if they differ from the file; returns whether it wrote."""
        data = self.render(records)
        try:
            if self.path.read_bytes() == data:
                return False
        except FileNotFoundError:
            if data == self.render({}):
                return False  # nothing to remember and no file: do not create one
        write_atomic(self.path, data)
        return True

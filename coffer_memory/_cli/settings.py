"""``coffer config list|get|set|unset``: the home's settings and where each value comes from."""

from __future__ import annotations

import argparse
import difflib
import errno
import json
import os
import sys
from pathlib import Path
from typing import Any

from .._errors import CofferError, InvalidInput, StorageFull, StorageNotWritable, safe_echo
from .._render import table
from ._common import add_command, add_group, emit_json

DEFAULT = "default"
FILE = "file"
ENVIRONMENT = "environment"
OPTION = "option"


EMPTY_HOME_VAR = "COFFER_HOME is set but empty, which counts as unset"
LEGACY_NOTE = "legacy: accepted and ignored; embeddings come from embedding.*"
UNSET_MEANS = {"embedding.dimensions": "the model's own size"}
"""What an unset setting means where it is not 'nothing' (``config list`` says it)."""


def _home(args: argparse.Namespace) -> tuple[Path, str]:
    """The home and what chose it: ``--home``, ``COFFER_HOME`` or the default."""
    from .._config import DEFAULT_HOME, home_path

    if args.home is not None:
        raw, source = args.home, OPTION
    elif os.environ.get("COFFER_HOME"):
        raw, source = os.environ["COFFER_HOME"], ENVIRONMENT
    else:
        raw, source = str(DEFAULT_HOME), DEFAULT
    return home_path(raw), source


def home_reason(args: argparse.Namespace) -> str:
    """Why the home in use is the one it is, in words (``coffer doctor`` and ``config list`` say it):
    an empty ``COFFER_HOME`` falls back to ``~/.coffer``, as XDG's variables do, and says so."""
    _, source = _home(args)
    if source == OPTION:
        return "--home"
    if source == ENVIRONMENT:
        return "COFFER_HOME"
    if os.environ.get("COFFER_HOME") == "":
        return f"the default: {EMPTY_HOME_VAR}"
    return "the default: no --home and no COFFER_HOME"


def _lookup(data: dict[str, Any], key: str) -> tuple[bool, Any]:
    section, _, name = key.rpartition(".")
    holder = data.get(section) if section else data
    if isinstance(holder, dict) and name in holder:
        return True, holder[name]
    return False, None


def _check_key(key: str, keys: dict[str, str]) -> None:
    if key not in keys:
        close = difflib.get_close_matches(key, list(keys), n=3)
        also = f"; did you mean {' or '.join(close)}?" if close else "; `coffer config list` shows them all"
        raise InvalidInput(f"unknown setting {safe_echo(key)!r}{also}", field="key")


def _plain(value: Any) -> Any:
    return str(value) if isinstance(value, Path) else value


def _shown(value: Any) -> str:
    if value is None:
        return "(unset)"
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def entries(args: argparse.Namespace) -> list[dict[str, Any]]:
    """Every setting: key, effective value, source and environment variable."""
    from .._config import Settings, env_overrides, read_config_file, setting_keys
    from .._store_config import LEGACY_KEYS

    home, home_source = _home(args)
    file_data = read_config_file(home)
    env_data = env_overrides(os.environ)
    settings = Settings.load(home)
    rows = [{"key": "home", "value": str(home), "source": home_source, "env": "COFFER_HOME"}]
    if home_source == DEFAULT and os.environ.get("COFFER_HOME") == "":
        rows[0]["note"] = EMPTY_HOME_VAR
    legacy = {f"memory.{name}" for name in LEGACY_KEYS}
    for key, var in setting_keys().items():
        value: Any = settings
        for part in key.split("."):
            value = getattr(value, part)
        source = ENVIRONMENT if _lookup(env_data, key)[0] else FILE if _lookup(file_data, key)[0] else DEFAULT
        row = {"key": key, "value": _plain(value), "source": source, "env": var}
        if key in legacy:
            row["note"] = LEGACY_NOTE
        elif value is None and key in UNSET_MEANS:
            row["note"] = f"unset: {UNSET_MEANS[key]}"
        rows.append(row)
    return rows


def _listed(row: dict[str, Any]) -> tuple[str, str, str, str] | None:
    """A row of ``config list``'s table; None for a legacy key nobody set (its default, such as
    ``memory.embedding_dimensions 768``, read as the size in effect, which it never is)."""
    note = row.get("note")
    if note == LEGACY_NOTE:
        if row["source"] == DEFAULT:
            return None
        return row["key"], f"{_shown(row['value'])} (ignored: {note})", row["source"], row["env"]
    if row["value"] is None and note:
        return row["key"], f"({note})", row["source"], row["env"]
    source = f"{row['source']} ({note})" if note else row["source"]
    return row["key"], _shown(row["value"]), source, row["env"]


def cmd_list(args: argparse.Namespace) -> None:
    rows = entries(args)
    if args.json:
        emit_json(rows)
        return
    shown = [line for line in map(_listed, rows) if line is not None]
    print(table(("key", "value", "source", "environment variable"), shown))


def cmd_get(args: argparse.Namespace) -> None:
    from .._config import setting_keys

    if args.key != "home":
        _check_key(args.key, setting_keys())
    row = next(r for r in entries(args) if r["key"] == args.key)
    if args.json:
        emit_json(row)
        return
    print(_shown(row["value"]))
    if row.get("note"):
        print(f"note: {row['note']}", file=sys.stderr)


def _write(args: argparse.Namespace, key: str, value: Any) -> Path:
    """Validate ``config.toml`` with ``key`` set to ``value`` (None removes it), then write it."""
    import tomlkit

    from .._agents.config_files import write_atomic
    from .._config import CONFIG_FILENAME, Settings, read_config_file, validation_problems

    home, _ = _home(args)
    data = read_config_file(home)
    section, _, name = key.rpartition(".")
    holder = data.setdefault(section, {}) if section else data
    if value is None:
        holder.pop(name, None)
    else:
        holder[name] = value
    try:
        checked = Settings.model_validate({**data, "home": home})
    except ValueError as exc:  # pydantic's ValidationError lists each problem with its place
        raise InvalidInput(f"not saved: {validation_problems(exc)}", field=key) from None
    path = home / CONFIG_FILENAME
    doc = tomlkit.parse(path.read_text(encoding="utf-8")) if path.is_file() else tomlkit.document()
    target: Any = doc
    if section:
        if section not in doc:
            doc[section] = tomlkit.table()
        target = doc[section]
    if value is None:
        target.pop(name, None)
    else:
        typed: Any = checked
        for part in key.split("."):
            typed = getattr(typed, part)
        target[name] = _plain(typed)
    try:
        write_atomic(path, tomlkit.dumps(doc).encode("utf-8"))
    except OSError as exc:
        raise _not_written(exc, path) from None
    return path


def _not_written(exc: OSError, path: Path) -> CofferError | OSError:
    """A config.toml that could not be written, typed as a store write is (a read-only home, a
    full disk): the CLI's one error line, never 'unexpected OSError'."""
    reason = os.strerror(exc.errno or 0)
    if exc.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG):
        return StorageFull(str(path), reason)
    if exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        return StorageNotWritable(str(path.parent), reason)
    return exc


def _parse_value(key: str, raw: str) -> Any:
    from .._config import is_list_setting

    if not is_list_setting(key):
        return raw
    if raw.startswith("["):
        try:
            return json.loads(raw)
        except ValueError as exc:
            raise InvalidInput(
                f"{key} takes a JSON list or comma-separated values: {exc}", field=key
            ) from None
    return [v.strip() for v in raw.split(",") if v.strip()]


def _settable(key: str) -> str:
    """The environment variable of a key ``config set`` may write; InvalidInput for any other key."""
    from .._config import setting_keys

    keys = setting_keys()
    if key == "home":
        raise InvalidInput("the home is chosen by --home or COFFER_HOME, not by config.toml", field="key")
    _check_key(key, keys)
    return keys[key]


def _save(args: argparse.Namespace, var: str, value: Any) -> None:
    path = _write(args, args.key, value)
    if args.json:
        emit_json({"key": args.key, "value": value, "path": path})
    else:
        print(f"{args.key} = {_shown(value)}" if value is not None else f"{args.key} removed", f"in {path}")
    if os.environ.get(var):
        print(f"note: {var} is set in the environment and overrides this value")


def _check_provider(key: str, value: Any) -> None:
    """A provider that no installed plugin registers is refused, naming those that are: ``bogus``
    was saved, then every LLM-driven command (or vector recall) failed on it later."""
    from ..plugins.manager import get_embedder_factories, get_llm_factories, skipped_note

    if key == "llm.provider":
        hook, allowed = "register_llms", ["none", *sorted(get_llm_factories())]
    elif key == "embedding.provider":
        hook, allowed = "register_embedders", ["auto", "none", *sorted(get_embedder_factories())]
    else:
        return
    if value not in allowed:
        raise InvalidInput(
            f"not saved: {key} must be one of {', '.join(allowed)} (a plugin adds more), not {safe_echo(str(value))!r}"
            + skipped_note(hook),
            field=key,
            allowed=allowed,
        )


def cmd_set(args: argparse.Namespace) -> None:
    var = _settable(args.key)
    value = _parse_value(args.key, args.value)
    _check_provider(args.key, value)
    _save(args, var, value)


def cmd_unset(args: argparse.Namespace) -> None:
    _save(args, _settable(args.key), None)


def register(sub: Any) -> None:
    """Add ``coffer config list|get|set|unset`` (they open no store, so they run without a service)."""
    csub = add_group(sub, "config", "show or change settings (config.toml) and where each value comes from")
    p = add_command(csub, "list", "every setting: value, source (default, file, environment) and variable")
    p.set_defaults(run=cmd_list)
    p = add_command(csub, "get", "one setting's value")
    p.add_argument("key", help="dotted key, e.g. llm.model (see `coffer config list`)")
    p.set_defaults(run=cmd_get)
    p = add_command(csub, "set", "set a setting in config.toml (validated before it is written)")
    p.add_argument("key", help="dotted key, e.g. llm.model (see `coffer config list`)")
    p.add_argument("value", help="the value; lists take comma-separated values or a JSON list")
    p.set_defaults(run=cmd_set)
    p = add_command(csub, "unset", "remove a setting from config.toml (back to its default)")
    p.add_argument("key", help="dotted key, e.g. llm.model")
    p.set_defaults(run=cmd_unset)

"""Edits by key path in a loaded agent config document (JSON or TOML), recording what coffer created.

``install.EditSession`` makes every edit through these: a key path is a tuple of keys from the top
level; the containers made on the way are recorded so that uninstall can prune them when empty.
"""

from __future__ import annotations

from collections.abc import Iterator, MutableMapping
from typing import Any

from tomlkit.exceptions import TOMLKitError

from .._errors import AgentConfigInvalid
from .config_files import ConfigDoc
from .registry import KeyPath
from .specs import Setting

__all__ = ["container", "delete_key", "get_key", "hook_groups", "keep_users_keys", "prune", "set_key"]


def keep_users_keys(s: Setting, current: Any, wanted: Any) -> Any:
    """``wanted`` plus the keys the user added to coffer's entry ``current`` (``Setting.owns``)."""
    if s.owns is None or not isinstance(current, dict) or not isinstance(wanted, dict):
        return wanted
    if s.ours is None or not s.ours(current):
        return wanted
    return {**wanted, **{k: v for k, v in current.items() if k not in s.owns}}


def get_key(root: Any, path: KeyPath) -> tuple[bool, Any]:
    """Whether ``path`` is in ``root``, and the value there (``None`` when it is not)."""
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


def set_key(doc: ConfigDoc, path: KeyPath, value: Any, created: list[KeyPath]) -> None:
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


def delete_key(root: Any, path: KeyPath) -> None:
    """Remove ``path`` from ``root`` when it is there."""
    found, parent = get_key(root, path[:-1])
    if found and isinstance(parent, MutableMapping) and path[-1] in parent:
        del parent[path[-1]]


def prune(doc: ConfigDoc, created: list[KeyPath]) -> None:
    """Remove the containers coffer created that are empty now (deepest first)."""
    for path in sorted(created, key=len, reverse=True):
        found, node = get_key(doc.data, path)
        if not found:
            created.remove(path)
        elif isinstance(node, MutableMapping | list) and len(node) == 0:
            delete_key(doc.data, path)
            created.remove(path)


def hook_groups(doc: ConfigDoc, event: str) -> Iterator[dict[str, Any]]:
    """The well-formed matcher groups of ``hooks.<event>`` (anything odd is the user's: skipped)."""
    _, groups = get_key(doc.data, ("hooks", event))
    for group in groups if isinstance(groups, list) else ():
        if isinstance(group, dict) and isinstance(group.get("hooks"), list):
            yield group


def container(doc: ConfigDoc, path: KeyPath, kind: type, created: list[KeyPath]) -> Any:
    """The container at ``path`` (a new ``kind`` when missing); refuses a non-container there."""
    found, node = get_key(doc.data, path)
    if not found:
        set_key(doc, path, kind(), created)
        _note_created(created, path)
        _, node = get_key(doc.data, path)
    if not isinstance(node, kind):
        raise AgentConfigInvalid(
            str(doc.path), f"'{'.'.join(path)}' is not {'a list' if kind is list else 'an object'}"
        )
    return node

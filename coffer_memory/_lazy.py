"""Lazy public names (PEP 562) for the package's public namespaces.

``coffer_memory`` and ``coffer_memory.plugins`` name their exports in a table and import each
from its private module on first use, so importing a namespace costs nothing until a name is read
(``coffer-hook`` starts on every agent session and must not pay for pydantic or the index).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, MutableMapping
from typing import Any


def lazy_exports(
    namespace: MutableMapping[str, Any], exports: Mapping[str, str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """Return ``(__getattr__, __dir__)`` for a module whose globals are ``namespace``.

    ``exports`` maps a public name to the (relative) module that defines it; a name read once is
    cached in the module's globals, so later reads are plain attribute lookups.
    """
    package = namespace["__name__"]

    def __getattr__(name: str) -> Any:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module, package), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted(set(namespace) | set(namespace.get("__all__", ())))

    return __getattr__, __dir__

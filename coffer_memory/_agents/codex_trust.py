"""Whether Codex will actually run coffer's hook: Codex's own record of hook review.

Codex runs a non-managed command hook only after the user has reviewed and trusted it in Codex
(``/hooks``), and records that in ``$CODEX_HOME/config.toml`` (developers.openai.com/codex/hooks,
"Review and trust hooks"; openai/codex ``codex-rs/hooks/src/engine/discovery.rs``)::

    [hooks.state."<abs path of hooks.json>:session_start:<group index>:<handler index>"]
    trusted_hash = "sha256:<hex>"
    enabled = false          # only when the user disabled the hook in /hooks

``trusted_hash`` is the sha256 of the hook's normalised definition: ``{"event_name": <snake_case
event>, "matcher": ..., "hooks": [{"type": "command", "command": ..., "timeout": <seconds, 600 when
unset>, "async": <bool>}]}`` (``statusMessage`` when set) as JSON with sorted keys and no spaces.
A hook whose definition changed since it was trusted (a new coffer path, another ``--home``) is
"modified" and skipped like an unreviewed one. Checked against Codex 0.171's app-server
``hooks/list`` (``currentHash``, ``trustStatus``) in tests/test_codex_trust.py's fixture.

Coffer only reads this: trusting a hook is the user's decision, made in Codex.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from pathlib import Path
from typing import Any, Literal

import attrs

from .config_files import ConfigDoc

TrustState = Literal["trusted", "untrusted", "modified", "disabled"]
DEFAULT_TIMEOUT_SECONDS = 600

__all__ = ["HookTrust", "TrustState", "hook_hash", "hook_trust"]


@attrs.frozen
class HookTrust:
    """Codex's review state of coffer's hook under one event."""

    event: str
    key: str
    """The ``hooks.state`` key Codex keeps it under."""
    state: TrustState

    def describe(self) -> str:
        """A line for ``agents status``."""
        return {
            "trusted": f"{self.event}: trusted in Codex",
            "untrusted": f"{self.event}: not reviewed yet; Codex skips it until you trust it "
            "(open Codex, type /hooks, trust the coffer-hook entry)",
            "modified": f"{self.event}: changed since you trusted it (new path or options); Codex skips "
            "it until you review it again in /hooks",
            "disabled": f"{self.event}: disabled in Codex (/hooks)",
        }[self.state]


def _snake(event: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", event).lower()


def _canonical(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _canonical(value[k]) for k in sorted(value)}
    if isinstance(value, list):
        return [_canonical(v) for v in value]
    return value


def hook_hash(event: str, matcher: str | None, handler: dict[str, Any]) -> str:
    """The ``trusted_hash`` Codex expects for one command ``handler`` of ``event`` (``SessionStart``)."""
    timeout = handler.get("timeout", handler.get("timeoutSec"))
    normal: dict[str, Any] = {
        "type": "command",
        "command": handler.get("command"),
        "timeout": max(int(timeout), 1) if isinstance(timeout, int | float) else DEFAULT_TIMEOUT_SECONDS,
        "async": bool(handler.get("async", False)),
    }
    if isinstance(handler.get("statusMessage"), str):
        normal["statusMessage"] = handler["statusMessage"]
    identity: dict[str, Any] = {"event_name": _snake(event), "hooks": [normal]}
    if matcher is not None:
        identity["matcher"] = matcher
    text = json.dumps(_canonical(identity), ensure_ascii=False, separators=(",", ":"))
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


def hook_trust(
    hooks_file: Path, hooks_doc: ConfigDoc, config_doc: ConfigDoc, events: tuple[str, ...], ours: Any
) -> list[HookTrust]:
    """Codex's review state of the first hook ``ours(handler)`` recognises under each event.

    ``hooks_doc`` is the loaded ``hooks.json``, ``config_doc`` the loaded ``config.toml``.
    """
    source = os.path.abspath(hooks_file)
    table = config_doc.plain(config_doc.data["hooks"]) if "hooks" in config_doc.data else {}
    raw_state = table.get("state") if isinstance(table, dict) else None
    states: dict[str, Any] = raw_state if isinstance(raw_state, dict) else {}
    root = hooks_doc.data.get("hooks")
    out = []
    for event in events:
        groups = root.get(event) if isinstance(root, dict) else None
        found = next(
            (
                (gi, hi, group, handler)
                for gi, group in enumerate(groups if isinstance(groups, list) else [])
                if isinstance(group, dict) and isinstance(group.get("hooks"), list)
                for hi, handler in enumerate(group["hooks"])
                if ours(handler)
            ),
            None,
        )
        if found is None:
            continue
        gi, hi, group, handler = found
        key = f"{source}:{_snake(event)}:{gi}:{hi}"
        entry = states.get(key)
        entry = entry if isinstance(entry, dict) else {}
        matcher = group.get("matcher") if isinstance(group.get("matcher"), str) else None
        state: TrustState
        if entry.get("enabled") is False:
            state = "disabled"
        elif not isinstance(entry.get("trusted_hash"), str):
            state = "untrusted"
        elif entry["trusted_hash"] == hook_hash(event, matcher, handler):
            state = "trusted"
        else:
            state = "modified"
        out.append(HookTrust(event=event, key=key, state=state))
    return out

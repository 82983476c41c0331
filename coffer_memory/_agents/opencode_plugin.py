"""The OpenCode plugin coffer installs: OpenCode's stand-in for a SessionStart hook.

OpenCode runs no shell hooks; it loads every ``.js`` file of ``<config>/plugins/`` as a plugin
(documented at https://opencode.ai/docs/plugins/). Coffer's plugin runs ``coffer-hook --agent
opencode`` with a SessionStart payload, the same command and bundle Claude Code and Codex get,
and adds the bundle to the system prompt of each of the session's model requests through
``experimental.chat.system.transform``. The bundle is asked for once per session, and again
after OpenCode compacted the session (its ``session.compacted`` event), as Claude Code's
SessionStart runs again with ``source: compact``.

The plugin must never break OpenCode: a missing ``coffer-hook``, a timeout, bad output or any
exception means no rules, never an error.
"""

from __future__ import annotations

import json
import shlex

PLUGIN_FILENAME = "coffer-memory.js"
MARKER = "// coffer-memory:"
"""The first line of the plugin (with ``coffer-hook`` in it, it marks the file as coffer's)."""

_TEMPLATE = """\
{marker} OpenCode's session-start rules, the bundle coffer-hook gives Claude Code and Codex.
// Written by `coffer agents install opencode`, removed by `coffer agents uninstall opencode`;
// edits are overwritten. Any failure (no coffer-hook, timeout, bad output) means no rules, never an error.
import {{ execFile }} from "node:child_process";

const HOOK = {argv};
const TIMEOUT_MS = {timeout_ms};

function sessionContext(cwd, sessionID, source) {{
  return new Promise((resolve) => {{
    try {{
      const payload = {{ hook_event_name: "SessionStart", session_id: sessionID, cwd, source }};
      const options = {{ timeout: TIMEOUT_MS, maxBuffer: 8 * 1024 * 1024, windowsHide: true }};
      const child = execFile(HOOK[0], HOOK.slice(1), options, (error, stdout) => {{
        try {{
          const text = error ? null : JSON.parse(stdout).hookSpecificOutput.additionalContext;
          resolve(typeof text === "string" ? text : "");
        }} catch {{
          resolve("");
        }}
      }});
      child.on("error", () => resolve(""));
      child.stdin?.on("error", () => {{}});
      child.stdin?.end(JSON.stringify(payload));
    }} catch {{
      resolve("");
    }}
  }});
}}

export const CofferMemory = async ({{ directory }}) => {{
  const bundles = new Map();
  const sources = new Map();
  return {{
    "experimental.chat.system.transform": async (input, output) => {{
      try {{
        const id = String(input?.sessionID ?? "");
        if (!bundles.has(id)) bundles.set(id, sessionContext(directory, id, sources.get(id) ?? "startup"));
        const text = await bundles.get(id);
        if (text && Array.isArray(output?.system) && !output.system.includes(text)) output.system.push(text);
      }} catch {{}}
    }},
    event: async ({{ event }}) => {{
      try {{
        if (event?.type !== "session.compacted") return;
        const id = String(event.properties?.sessionID ?? "");
        bundles.delete(id);
        sources.set(id, "compact");
      }} catch {{}}
    }},
  }};
}};
"""


def render_plugin(hook_command: str, timeout_seconds: int) -> str:
    """The plugin's source for one ``coffer-hook`` command line (as installed for hooks).

    The argv goes in as a JSON array (a valid JavaScript literal): no shell is involved.
    """
    argv = json.dumps(shlex.split(hook_command), ensure_ascii=False)
    return _TEMPLATE.format(marker=MARKER, argv=argv, timeout_ms=timeout_seconds * 1000)

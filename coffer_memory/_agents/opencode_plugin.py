"""The OpenCode plugin coffer installs: OpenCode's stand-in for the SessionStart and SessionEnd hooks.

OpenCode runs no shell hooks; it loads every ``.js`` file of ``<config>/plugins/`` as a plugin
(documented at https://opencode.ai/docs/plugins/). Coffer's plugin runs ``coffer-hook --agent
opencode`` with a SessionStart payload, the same command and bundle Claude Code and Codex get,
and adds the bundle to the system prompt of each of the session's model requests through
``experimental.chat.system.transform``. The bundle is asked for once per session, and again
after OpenCode compacted the session (its ``session.compacted`` event), as Claude Code's
SessionStart runs again with ``source: compact``.

OpenCode has no session-end event either; its ``session.idle`` event (the session answered its
prompt; ``opencode run`` fires it just before it exits) stands in for one: the plugin runs
``coffer-hook`` with a SessionEnd payload, detached and not waited for, and coffer distills the
turns the session added from OpenCode's database (``_transcripts.opencode``), incrementally as for
the other agents. A session is handed off at most once per ``END_EVERY_SECONDS`` (the terminal UI
idles after every answer), and an idle left waiting is handed off when OpenCode exits; subagent
sessions (``parentID``) are not sessions of their own.

The plugin must never break OpenCode: a missing ``coffer-hook``, a timeout, bad output or any
exception means no rules, never an error.
"""

from __future__ import annotations

import json
import shlex

PLUGIN_FILENAME = "coffer-memory.js"
# OpenCode's terminal UI goes idle after every answer: distilling each one would cost a model call
# per prompt, so a session is handed off at most this often (its first idle at once).
END_EVERY_SECONDS = 600
MARKER = "// coffer-memory:"
"""The first line of the plugin (with ``coffer-hook`` in it, it marks the file as coffer's)."""

_TEMPLATE = """\
{marker} OpenCode's session hooks: the rules coffer-hook gives Claude Code and Codex, and distillation.
// Written by `coffer agents install opencode`, removed by `coffer agents uninstall opencode`;
// edits are overwritten. Any failure (no coffer-hook, timeout, bad output) means no rules, never an error.
import {{ execFile, spawn }} from "node:child_process";
import {{ closeSync, openSync, unlinkSync, writeFileSync }} from "node:fs";
import {{ tmpdir }} from "node:os";
import {{ join }} from "node:path";

const HOOK = {argv};
const TIMEOUT_MS = {timeout_ms};
const END_EVERY_MS = {end_every_ms};

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

// coffer-hook hands the session to a detached distillation and returns; it runs detached itself
// and is not waited for. All of it is synchronous, so it works from the exit handler too: the
// payload goes in a private temporary file given to coffer-hook as its stdin (the name is removed
// at once; the open file stays readable).
function sessionEnd(cwd, sessionID) {{
  let fd = null;
  try {{
    const payload = {{ hook_event_name: "SessionEnd", session_id: sessionID, cwd, reason: "idle" }};
    const unique = `${{process.pid}}-${{Date.now()}}-${{Math.random().toString(36).slice(2)}}`;
    const file = join(tmpdir(), `coffer-session-end-${{unique}}.json`);
    writeFileSync(file, JSON.stringify(payload), {{ mode: 0o600, flag: "wx" }});
    try {{
      fd = openSync(file, "r");
    }} finally {{
      unlinkSync(file);
    }}
    const options = {{ detached: true, stdio: [fd, "ignore", "ignore"], windowsHide: true }};
    const child = spawn(HOOK[0], HOOK.slice(1), options);
    child.on("error", () => {{}});
    child.unref();
  }} catch {{
  }} finally {{
    try {{
      if (fd !== null) closeSync(fd);
    }} catch {{}}
  }}
}}

export const CofferMemory = async ({{ directory }}) => {{
  const bundles = new Map();
  const sources = new Map();
  const ended = new Map();
  const pending = new Map();
  const subagents = new Set();
  const handOff = (id) => {{
    clearTimeout(pending.get(id));
    pending.delete(id);
    ended.set(id, Date.now());
    sessionEnd(directory, id);
  }};
  // The session went idle (its prompt answered): distill what it added, at most once per
  // END_EVERY_MS per session; an idle within that is handed off when the interval is over, or
  // when OpenCode exits first (quitting the terminal UI).
  const idle = (id) => {{
    if (!id || subagents.has(id) || pending.has(id)) return;
    const wait = (ended.get(id) ?? -Infinity) + END_EVERY_MS - Date.now();
    if (wait <= 0) return handOff(id);
    const timer = setTimeout(() => handOff(id), wait);
    timer.unref?.();
    pending.set(id, timer);
  }};
  try {{
    process.on("exit", () => {{
      for (const id of [...pending.keys()]) handOff(id);
    }});
  }} catch {{}}
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
        const id = String(event?.properties?.sessionID ?? "");
        if (event?.type === "session.created" && event.properties?.info?.parentID) subagents.add(id);
        if (event?.type === "session.idle") idle(id);
        if (event?.type !== "session.compacted") return;
        bundles.delete(id);
        sources.set(id, "compact");
      }} catch {{}}
    }},
  }};
}};
"""


def render_plugin(
    hook_command: str, timeout_seconds: int, end_every_seconds: float = END_EVERY_SECONDS
) -> str:
    """The plugin's source for one ``coffer-hook`` command line (as installed for hooks).

    The argv goes in as a JSON array (a valid JavaScript literal): no shell is involved.
    """
    argv = json.dumps(shlex.split(hook_command), ensure_ascii=False)
    return _TEMPLATE.format(
        marker=MARKER,
        argv=argv,
        timeout_ms=timeout_seconds * 1000,
        end_every_ms=int(end_every_seconds * 1000),
    )

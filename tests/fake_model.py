"""A fake model server on 127.0.0.1 for driving the real agent CLIs offline.

It speaks just enough of three wire formats for an agent to run one session against it:

- OpenAI Responses (``POST .../responses``, Codex): server-sent events ``response.created``,
  ``response.output_item.done`` (a ``message`` or a ``function_call``), ``response.completed``;
- OpenAI Chat Completions (``POST .../chat/completions``, OpenAI-compatible providers in OpenCode):
  ``chat.completion.chunk`` events, ``tool_calls`` deltas, then ``[DONE]``;
- Anthropic Messages (``POST .../messages``, Claude Code via ``ANTHROPIC_BASE_URL``):
  ``message_start``, ``content_block_*`` (``text`` or ``tool_use``), ``message_delta``, ``message_stop``.

Every request body is kept (``requests``), so a test can read what the agent sent the model: its
system prompt and context, the tool definitions, the tool results. The answer is scripted by one
rule: while the request offers a tool whose name ends with ``call_tool`` and no tool result is in the
conversation yet, answer with one call of that tool (``call_args``); otherwise answer ``reply``.
Anything else (model lists, telemetry) gets a small JSON answer so no agent waits on it.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import attrs

__all__ = ["FakeModel", "Recorded"]

WAIT_TOOL = "WaitForMcpServers"
"""Claude Code's tool for waiting on MCP servers that are still connecting (2.1.197)."""
SEARCH_TOOL = "ToolSearch"
"""Claude Code 2.1.332 defers MCP tools: the model finds them with this tool (which also waits for
servers still connecting), and the next request offers the tools found."""


@attrs.define
class Recorded:
    """One request the agent made."""

    method: str
    path: str
    body: Any


@attrs.define
class FakeModel:
    """The scripted model; ``start()`` serves it on 127.0.0.1 in a thread, ``stop()`` ends it."""

    reply: str | Callable[[dict[str, Any]], str] = "Done."
    """The final answer, or a function of the request body giving it."""
    call_tool: str | None = None
    call_args: dict[str, Any] = attrs.field(factory=dict)
    overflow_tokens: int = 0
    """Chat Completions: the prompt tokens the first tool call reports (0: the usual 10), so an
    agent that compacts on a full context window compacts the session once."""
    requests: list[Recorded] = attrs.field(factory=list)
    _server: ThreadingHTTPServer | None = None
    _lock: threading.Lock = attrs.field(factory=threading.Lock)

    @property
    def url(self) -> str:
        """``http://127.0.0.1:<port>``."""
        assert self._server is not None, "not started"
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def start(self) -> FakeModel:
        """Serve on a free port of 127.0.0.1 until ``stop()``."""
        model = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                model._record("GET", self.path, None)
                self._json({"object": "list", "data": [], "models": []})

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                try:
                    body = json.loads(raw) if raw else None
                except ValueError:
                    body = raw.decode("utf-8", "replace")
                model._record("POST", self.path, body)
                path = self.path.split("?", 1)[0]
                if not isinstance(body, dict):
                    self._json({})
                elif path.endswith("/responses"):
                    self._sse(model._responses(body), named=True)
                elif path.endswith("/chat/completions") and not body.get("stream"):
                    self._json(model._chat_completion(body))
                elif path.endswith("/chat/completions"):
                    self._sse(model._chat(body), done=True)
                elif path.endswith("/messages") and not body.get("stream"):
                    self._json(model._anthropic_message(body))
                elif path.endswith("/messages"):
                    self._sse(model._anthropic(body), named=True)
                elif path.endswith("/count_tokens"):
                    self._json({"input_tokens": 10})
                else:
                    self._json({})

            def _json(self, value: Any) -> None:
                data = json.dumps(value).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _sse(self, events: Iterator[dict[str, Any]], done: bool = False, named: bool = False) -> None:
                chunks = []
                for event in events:
                    head = f"event: {event['type']}\n" if named else ""
                    chunks.append(f"{head}data: {json.dumps(event)}\n\n")
                if done:
                    chunks.append("data: [DONE]\n\n")
                data = "".join(chunks).encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Cache-Control", "no-cache")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        """Stop serving."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> FakeModel:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- what the agent sent -------------------------------------------------------------------
    def _record(self, method: str, path: str, body: Any) -> None:
        with self._lock:
            self.requests.append(Recorded(method, path, body))

    def model_requests(self) -> list[Any]:
        """The bodies of the requests that asked the model for an answer, in order."""
        ends = ("/responses", "/chat/completions", "/messages")
        with self._lock:
            return [
                r.body
                for r in self.requests
                if r.method == "POST" and r.path.split("?", 1)[0].endswith(ends) and isinstance(r.body, dict)
            ]

    def _text(self, body: dict[str, Any]) -> str:
        return self.reply(body) if callable(self.reply) else self.reply

    def _tool(self, names: list[str], has_result: bool) -> str | None:
        if self.call_tool is None or has_result:
            return None
        return next((n for n in names if n.endswith(self.call_tool)), None)

    # -- the three wire formats ----------------------------------------------------------------
    def _responses(self, body: dict[str, Any]) -> Iterator[dict[str, Any]]:
        items = body.get("input") if isinstance(body.get("input"), list) else []
        has_result = any(isinstance(i, dict) and i.get("type") == "function_call_output" for i in items)
        # Codex groups an MCP server's tools in a namespace (``mcp__<server>``); a call names both.
        spaces: dict[str, str | None] = {}
        for t in body.get("tools") or []:
            if isinstance(t, dict) and t.get("type") == "namespace":
                spaces.update(
                    {i.get("name", ""): t.get("name") for i in t.get("tools") or [] if isinstance(i, dict)}
                )
            elif isinstance(t, dict):
                spaces[t.get("name", "")] = None
        tool = self._tool(list(spaces), has_result)
        yield {"type": "response.created", "response": {"id": "resp_fake"}}
        if tool is not None:
            item: dict[str, Any] = {
                "type": "function_call",
                "id": "fc_fake",
                "call_id": "call_fake_1",
                "name": tool,
                "arguments": json.dumps(self.call_args),
                **({"namespace": spaces[tool]} if spaces[tool] else {}),
            }
        else:
            item = {
                "type": "message",
                "id": "msg_fake",
                "role": "assistant",
                "content": [{"type": "output_text", "text": self._text(body), "annotations": []}],
            }
        yield {"type": "response.output_item.done", "output_index": 0, "item": item}
        usage = {
            "input_tokens": 10,
            "input_tokens_details": None,
            "output_tokens": 5,
            "output_tokens_details": None,
            "total_tokens": 15,
        }
        yield {"type": "response.completed", "response": {"id": "resp_fake", "usage": usage}}

    def _chat(self, body: dict[str, Any]) -> Iterator[dict[str, Any]]:
        messages = body.get("messages") if isinstance(body.get("messages"), list) else []
        has_result = any(isinstance(m, dict) and m.get("role") == "tool" for m in messages)
        names = [
            (t.get("function") or {}).get("name", "") for t in body.get("tools") or [] if isinstance(t, dict)
        ]
        tool = self._tool(names, has_result)
        base = {"id": "chatcmpl_fake", "object": "chat.completion.chunk", "created": 0, "model": "fake"}
        if tool is not None:
            call = {
                "index": 0,
                "id": "call_fake_1",
                "type": "function",
                "function": {"name": tool, "arguments": json.dumps(self.call_args)},
            }
            delta: dict[str, Any] = {"role": "assistant", "tool_calls": [call]}
            finish = "tool_calls"
        else:
            delta, finish = {"role": "assistant", "content": self._text(body)}, "stop"
        yield {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]}
        prompt = 10
        if tool is not None and self.overflow_tokens:
            prompt, self.overflow_tokens = self.overflow_tokens, 0
        usage = {"prompt_tokens": prompt, "completion_tokens": 5, "total_tokens": prompt + 5}
        yield {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}], "usage": usage}

    def _chat_completion(self, body: dict[str, Any]) -> dict[str, Any]:
        """A whole (not streamed) chat completion: the text answer only."""
        return {
            "id": "chatcmpl_fake",
            "object": "chat.completion",
            "created": 0,
            "model": body.get("model", "fake"),
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": self._text(body)},
                    "finish_reason": "stop",
                }
            ],
            "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
        }

    def _anthropic_reply(self, body: dict[str, Any]) -> tuple[dict[str, Any], str]:
        """The one content block to answer with, and its stop reason."""
        messages = body.get("messages") if isinstance(body.get("messages"), list) else []
        results = {
            block.get("tool_use_id")
            for m in messages
            if isinstance(m, dict) and isinstance(m.get("content"), list)
            for block in m["content"]
            if isinstance(block, dict) and block.get("type") == "tool_result"
        }
        names = [t.get("name", "") for t in body.get("tools") or [] if isinstance(t, dict)]
        tool = self._tool(names, "toolu_fake_1" in results)
        if tool is not None:
            return {
                "type": "tool_use",
                "id": "toolu_fake_1",
                "name": tool,
                "input": self.call_args,
            }, "tool_use"
        # Claude Code offers WAIT_TOOL while an MCP server is still connecting, or defers MCP tools
        # behind SEARCH_TOOL; a model that wants the server's tool calls it (once), and the next
        # request lists the server's tools. The search is by the tool's server prefix ("coffer").
        wanted = self.call_tool is not None and "toolu_fake_1" not in results
        if wanted and WAIT_TOOL in names and "toolu_fake_wait" not in results:
            return {"type": "tool_use", "id": "toolu_fake_wait", "name": WAIT_TOOL, "input": {}}, "tool_use"
        if wanted and SEARCH_TOOL in names and "toolu_fake_search" not in results:
            query = {"query": str(self.call_tool).split("__")[0], "max_results": 20}
            return {
                "type": "tool_use",
                "id": "toolu_fake_search",
                "name": SEARCH_TOOL,
                "input": query,
            }, "tool_use"
        return {"type": "text", "text": self._text(body)}, "end_turn"

    def _anthropic_message(self, body: dict[str, Any]) -> dict[str, Any]:
        block, stop = self._anthropic_reply(body)
        return {
            # Unique per answer: Claude Code groups a conversation's rounds by message id (compaction
            # refuses "fewer than 2 groups" when every answer has the same one).
            "id": f"msg_fake_{len(self.requests)}",
            "type": "message",
            "role": "assistant",
            "model": body.get("model", "fake"),
            "content": [block],
            "stop_reason": stop,
            "stop_sequence": None,
            "usage": {"input_tokens": 10, "output_tokens": 5},
        }

    def _anthropic(self, body: dict[str, Any]) -> Iterator[dict[str, Any]]:
        block, stop = self._anthropic_reply(body)
        message = {**self._anthropic_message(body), "content": [], "stop_reason": None}
        yield {"type": "message_start", "message": message}
        if block["type"] == "tool_use":
            start = {**block, "input": {}}
            delta: dict[str, Any] = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
        else:
            start, delta = {"type": "text", "text": ""}, {"type": "text_delta", "text": block["text"]}
        yield {"type": "content_block_start", "index": 0, "content_block": start}
        yield {"type": "content_block_delta", "index": 0, "delta": delta}
        yield {"type": "content_block_stop", "index": 0}
        yield {
            "type": "message_delta",
            "delta": {"stop_reason": stop, "stop_sequence": None},
            "usage": {"output_tokens": 5},
        }
        yield {"type": "message_stop"}

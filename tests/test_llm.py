"""The LLM surface: value objects, extract_json, the ``register_llms`` hook and the OpenAI chat client.

Request shapes and the response_format downgrade go through ``httpx.MockTransport``; retries,
refusals, truncation, give-ups and a server that goes away go against a real OpenAI-compatible
server on 127.0.0.1 that each test scripts.
"""

from __future__ import annotations

import importlib.util
import json
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import attrs
import httpx
import pytest
from http_scripted import ScriptedServer, answer, chat_body, fail, serve
from served import closed_port

from coffer_memory import InvalidInput, Settings
from coffer_memory._config import LLMSettings
from coffer_memory._llm import (
    ChatMessage,
    Completion,
    LLMOutputInvalid,
    LLMUnavailable,
    TokenUsage,
    extract_json,
)
from coffer_memory.plugins import LLM, get_llm, get_llm_factories, get_plugin_manager
from coffer_memory.plugins.builtin.openai_chat import OpenAIChatLLM

MOCK_URL = "http://llm.test/v1"
ASK = [ChatMessage("system", "Answer in JSON."), ChatMessage("user", "Which lanes exist?")]
SCHEMA = {
    "type": "object",
    "properties": {"lanes": {"type": "array", "items": {"type": "string"}}},
    "required": ["lanes"],
    "additionalProperties": False,
}
DOCS = Path(__file__).parent.parent / "docs"


def settings(**overrides: Any) -> LLMSettings:
    base: dict[str, Any] = {
        "provider": "openai",
        "base_url": MOCK_URL,
        "model": "test-chat",
        "retry_max_seconds": 0.05,
        "timeout_seconds": 5.0,
        "max_retries": 2,
    }
    base.update(overrides)
    return LLMSettings(**base)


def api_error(status: int, message: str, param: str | None = None) -> httpx.Response:
    return httpx.Response(
        status, json={"error": {"message": message, "type": "invalid_request_error", "param": param}}
    )


# -- value objects and extract_json -----------------------------------------------------------
def test_value_objects_are_frozen_and_checked() -> None:
    usage = TokenUsage(prompt_tokens=12, completion_tokens=30)
    assert usage.total == 42
    done = Completion("{}", usage, "m", "stop")
    cut = Completion('{"a": ', TokenUsage(), "m", "length")
    assert not done.truncated and cut.truncated
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        done.text = "x"  # type: ignore[misc]
    with pytest.raises(ValueError):
        ChatMessage("tool", "x")  # type: ignore[arg-type]
    assert LLMUnavailable("x", model="m").to_dict() == {
        "code": "LLM_UNAVAILABLE",
        "message": "x",
        "details": {"model": "m"},
    }


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"lanes": ["journal", "rules"]}', {"lanes": ["journal", "rules"]}),
        ('  [1, 2, {"a": "b"}]  ', [1, 2, {"a": "b"}]),
        ('```json\n{"facts": [{"title": "deploy"}]}\n```', {"facts": [{"title": "deploy"}]}),
        ('Here you go:\n```\n{"ok": true}\n```\nAnything else?', {"ok": True}),
        ('Sure! The result is {"ok": true, "n": 3}. Hope that helps.', {"ok": True, "n": 3}),
        ('Braces in strings: {"code": "if (x) { y(); } ]"} done', {"code": "if (x) { y(); } ]"}),
        ('The {placeholder} text, then {"real": 1}', {"real": 1}),
        ('<think>maybe {"draft": 1}</think>\n{"final": 2}', {"final": 2}),
        ('{"note": "line one\nline two"}', {"note": "line one\nline two"}),  # raw newline
        ('first {"a": 1} then {"b": 2}', {"a": 1}),
    ],
)
def test_extract_json_finds_the_first_value(text: str, expected: Any) -> None:
    assert extract_json(text) == expected


def test_extract_json_expect_skips_the_other_kind() -> None:
    text = 'As noted in [1], the answer is {"ok": true}.'
    assert extract_json(text) == [1]
    assert extract_json(text, expect="object") == {"ok": True}
    with pytest.raises(LLMOutputInvalid, match="no JSON array"):
        extract_json('{"ok": true}', expect="array")


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("", "empty"),
        ("   \n", "empty"),
        ("<think>hmm</think>", "empty"),
        ("I could not find any facts worth keeping.", "no_json"),
        ("{'single': 'quotes'}", "no_json"),
        ('{"facts": [{"title": "deploy"}, {"title": "back', "truncated"),
        ('```json\n{"facts": [1, 2,', "truncated"),
    ],
)
def test_extract_json_failures(text: str, reason: str) -> None:
    with pytest.raises(LLMOutputInvalid) as info:
        extract_json(text)
    assert info.value.reason == reason and info.value.code == "LLM_OUTPUT_INVALID"
    assert info.value.text == text


# -- settings and the plugin surface ----------------------------------------------------------
def test_no_llm_by_default(tmp_home: Path) -> None:
    assert LLMSettings().provider == "none"
    assert get_llm(LLMSettings()) is None
    assert Settings.load(tmp_home).llm == LLMSettings()


def test_llm_settings_from_config_toml(tmp_home: Path) -> None:
    tmp_home.mkdir()
    (tmp_home / "config.toml").write_text(
        '[llm]\nprovider = "openai"\nbase_url = "http://127.0.0.1:11434/v1"\nmodel = "qwen2.5:7b"\n'
    )
    loaded = Settings.load(tmp_home).llm
    assert (loaded.provider, loaded.model, loaded.json_mode, loaded.max_tokens) == (
        "openai",
        "qwen2.5:7b",
        "auto",
        2000,
    )
    llm = get_llm(loaded)
    assert isinstance(llm, OpenAIChatLLM) and isinstance(llm, LLM)
    assert llm.available() and llm.model_id == "openai-compatible:qwen2.5:7b"
    (tmp_home / "config.toml").write_text('[llm]\napi_key = "sk-in-a-file"\n')
    with pytest.raises(InvalidInput):
        Settings.load(tmp_home)


def test_unknown_provider_is_invalid_input() -> None:
    assert "openai" in get_llm_factories()
    with pytest.raises(InvalidInput, match="unknown llm provider 'nope'") as info:
        get_llm(LLMSettings(provider="nope"))
    assert info.value.field == "llm.provider"


def test_openai_without_model_is_not_available() -> None:
    llm = get_llm(LLMSettings(provider="openai"))
    assert llm is not None and not llm.available()
    with pytest.raises(LLMUnavailable, match=r"llm\.model"):
        llm.complete(ASK)


def _docs_plugin() -> ModuleType:
    """The example plugin of docs/llm.md, loaded from the page itself."""
    page = (DOCS / "llm.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", page, re.DOTALL)
    source = next(b for b in blocks if "@hookimpl" in b and "def register_llms" in b)
    spec = importlib.util.spec_from_loader("coffer_docs_echo_llm", loader=None)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    exec(compile(source, "docs/llm.md", "exec"), module.__dict__)
    return module


@pytest.fixture
def docs_plugin() -> Iterator[ModuleType]:
    module = _docs_plugin()
    pm = get_plugin_manager()
    pm.register(module, name="coffer-docs-echo-llm")
    yield module
    pm.unregister(name="coffer-docs-echo-llm")


def test_the_docs_example_plugin_registers_and_answers(docs_plugin: ModuleType) -> None:
    llm = get_llm(LLMSettings(provider="echo", model="scripted"))
    assert isinstance(llm, LLM) and llm.available()
    answer = llm.complete([ChatMessage("user", 'reply {"lanes": ["rules"]}')], json_schema=SCHEMA)
    assert extract_json(answer.text) == {"lanes": ["rules"]}
    assert answer.usage.total > 0 and answer.finish_reason == "stop"


# -- request shapes through MockTransport -----------------------------------------------------
Handler = Callable[[httpx.Request], httpx.Response]


def mock_llm(handler: Handler, **overrides: Any) -> tuple[OpenAIChatLLM, list[dict[str, Any]]]:
    """An LLM whose HTTP goes to ``handler``; the JSON body of every request is recorded."""
    seen: list[dict[str, Any]] = []

    def record(request: httpx.Request) -> httpx.Response:
        assert request.method == "POST" and str(request.url) == f"{MOCK_URL}/chat/completions"
        seen.append({"body": json.loads(request.content), "headers": dict(request.headers)})
        return handler(request)

    return OpenAIChatLLM(settings(**overrides), transport=httpx.MockTransport(record)), seen


def ok(request: httpx.Request) -> httpx.Response:
    return httpx.Response(200, json=chat_body(usage={"prompt_tokens": 20, "completion_tokens": 7}))


def test_request_shape_and_bearer_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COFFER_TEST_LLM_KEY", "sk-chat-123")
    llm, seen = mock_llm(ok, base_url=MOCK_URL + "/", api_key_env="COFFER_TEST_LLM_KEY")
    answer = llm.complete(ASK)
    assert answer == Completion('{"lanes": ["journal"]}', TokenUsage(20, 7), "test-chat-0613", "stop")
    assert seen[0]["body"] == {
        "model": "test-chat",
        "messages": [
            {"role": "system", "content": "Answer in JSON."},
            {"role": "user", "content": "Which lanes exist?"},
        ],
        "max_tokens": 2000,
        "temperature": 0.0,
    }
    assert seen[0]["headers"]["authorization"] == "Bearer sk-chat-123"
    llm.complete(ASK, max_tokens=50, temperature=0.7)
    assert (seen[1]["body"]["max_tokens"], seen[1]["body"]["temperature"]) == (50, 0.7)
    llm.close()


def test_missing_key_is_llm_unavailable_before_any_request(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("COFFER_TEST_ABSENT_KEY", raising=False)
    llm, seen = mock_llm(ok, api_key_env="COFFER_TEST_ABSENT_KEY")
    with pytest.raises(LLMUnavailable, match="COFFER_TEST_ABSENT_KEY"):
        llm.complete(ASK)
    assert seen == []
    bare, seen_bare = mock_llm(ok)
    bare.complete(ASK)
    assert "authorization" not in seen_bare[0]["headers"]


@pytest.mark.parametrize(
    ("json_mode", "expected"),
    [
        (
            "auto",
            {"type": "json_schema", "json_schema": {"name": "coffer", "schema": SCHEMA, "strict": True}},
        ),
        (
            "json_schema",
            {"type": "json_schema", "json_schema": {"name": "coffer", "schema": SCHEMA, "strict": True}},
        ),
        ("json_object", {"type": "json_object"}),
        ("off", None),
    ],
)
def test_response_format_follows_json_mode(json_mode: str, expected: dict[str, Any] | None) -> None:
    llm, seen = mock_llm(ok, json_mode=json_mode)
    llm.complete(ASK, json_schema=SCHEMA)
    assert seen[0]["body"].get("response_format") == expected
    llm.complete(ASK)
    assert "response_format" not in seen[1]["body"]


def rejects(*types: str) -> Handler:
    """A server that answers 400 to these response_format types, like one without JSON mode."""

    def handle(request: httpx.Request) -> httpx.Response:
        fmt = json.loads(request.content).get("response_format")
        if fmt is not None and fmt["type"] in types:
            return api_error(400, f"response_format.type '{fmt['type']}' is not supported", "response_format")
        return ok(request)

    return handle


def formats(seen: list[dict[str, Any]]) -> list[str | None]:
    return [(s["body"].get("response_format") or {}).get("type") for s in seen]


def test_downgrade_to_json_object_is_remembered() -> None:
    llm, seen = mock_llm(rejects("json_schema"))
    assert llm.complete(ASK, json_schema=SCHEMA).text == '{"lanes": ["journal"]}'
    assert formats(seen) == ["json_schema", "json_object"]
    llm.complete(ASK, json_schema=SCHEMA)
    assert formats(seen) == ["json_schema", "json_object", "json_object"]
    assert llm.json_level == "json_object"


def test_downgrade_to_no_response_format_is_remembered() -> None:
    llm, seen = mock_llm(rejects("json_schema", "json_object"))
    llm.complete(ASK, json_schema=SCHEMA)
    assert formats(seen) == ["json_schema", "json_object", None]
    llm.complete(ASK, json_schema=SCHEMA)
    assert formats(seen) == ["json_schema", "json_object", None, None]
    assert llm.json_level == "off"


def test_pinned_json_mode_is_not_downgraded() -> None:
    llm, seen = mock_llm(rejects("json_schema"), json_mode="json_schema")
    with pytest.raises(LLMUnavailable, match=r"HTTP 400.*json_schema' is not supported") as info:
        llm.complete(ASK, json_schema=SCHEMA)
    assert formats(seen) == ["json_schema"] and info.value.status == 400


def test_an_unrelated_400_is_not_a_downgrade() -> None:
    llm, seen = mock_llm(lambda request: api_error(400, "This model's maximum context length is 8192 tokens"))
    with pytest.raises(
        LLMUnavailable, match="rejected model 'test-chat' \\(HTTP 400\\): This model's maximum"
    ):
        llm.complete(ASK, json_schema=SCHEMA)
    assert len(seen) == 1 and llm.json_level == "json_schema"


@pytest.mark.parametrize("status", [400, 401])
@pytest.mark.parametrize(
    "key",
    ["sk-proj-Tz4" + "fakeFAKEfake7Qx2Lm9Np3Rs6Vw8Yb1Cd5Fg0Hj4Kl7Mn2Pq", "local-key-" + "not-a-known-shape"],
)
def test_an_error_body_that_repeats_the_api_key_does_not_carry_it_into_the_error(
    monkeypatch: pytest.MonkeyPatch, status: int, key: str
) -> None:
    # Some servers answer a refused key with the key itself ("Incorrect API key provided: ...");
    # the message became LLMUnavailable's and was printed by `coffer distill` and kept in results.
    monkeypatch.setenv("COFFER_TEST_LLM_KEY", key)

    def refuse(request: httpx.Request) -> httpx.Response:
        sent = request.headers["authorization"]
        return api_error(status, f"Incorrect API key provided: {sent}. Key: {key}")

    llm, _ = mock_llm(refuse, api_key_env="COFFER_TEST_LLM_KEY")
    with pytest.raises(LLMUnavailable) as info:
        llm.complete(ASK)
    assert f"HTTP {status}" in info.value.message and "Incorrect API key provided" in info.value.message
    assert key not in info.value.message and key not in str(info.value.to_dict())


def test_reasoning_model_parameters_are_adapted_once() -> None:
    def reasoning_model(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        if "max_tokens" in body:
            return api_error(
                400,
                "Unsupported parameter: 'max_tokens' is not supported with this model. "
                "Use 'max_completion_tokens' instead.",
                "max_tokens",
            )
        if "temperature" in body:
            return api_error(
                400,
                "Unsupported value: 'temperature' does not support 0.0 with this model. "
                "Only the default (1) value is supported.",
                "temperature",
            )
        return ok(request)

    llm, seen = mock_llm(reasoning_model)
    llm.complete(ASK)
    assert len(seen) == 3
    assert seen[-1]["body"]["max_completion_tokens"] == 2000 and "temperature" not in seen[-1]["body"]
    llm.complete(ASK)
    assert len(seen) == 4


def test_usage_missing_is_zeros_and_content_parts_are_joined() -> None:
    parts = [{"type": "text", "text": '{"a": '}, {"type": "text", "text": "1}"}]
    llm, _ = mock_llm(lambda request: httpx.Response(200, json=chat_body(parts)))
    answer = llm.complete(ASK)
    assert answer.usage == TokenUsage(0, 0) and answer.usage.total == 0
    assert extract_json(answer.text) == {"a": 1}


@pytest.mark.parametrize(
    "content",
    [b"not json {", b"{}", b'{"choices": []}', b'{"choices": [{"message": "hi"}]}', b"[]"],
)
def test_malformed_body_is_llm_unavailable(content: bytes) -> None:
    llm, seen = mock_llm(lambda request: httpx.Response(200, content=content))
    with pytest.raises(LLMUnavailable, match="malformed chat completion"):
        llm.complete(ASK)
    assert len(seen) == 1


# -- a real OpenAI-compatible server on 127.0.0.1 ---------------------------------------------
@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[ScriptedServer]:
    yield from serve(monkeypatch, answer('{"ok": true}'))


class CountingTransport(httpx.HTTPTransport):
    """The real httpx transport, counting the requests it is handed."""

    def __init__(self) -> None:
        super().__init__()
        self.calls = 0

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        self.calls += 1
        return super().handle_request(request)


def live(server: ScriptedServer, **overrides: Any) -> OpenAIChatLLM:
    return OpenAIChatLLM(settings(base_url=server.url, timeout_seconds=2.0, **overrides))


def test_server_malformed_json_content(server: ScriptedServer) -> None:
    server.script.append(answer("{'lanes': ['journal'],}"))
    llm = live(server)
    completion = llm.complete(ASK, json_schema=SCHEMA)
    assert completion.text == "{'lanes': ['journal'],}" and completion.model == "test-chat"
    with pytest.raises(LLMOutputInvalid) as info:
        extract_json(completion.text)
    assert info.value.reason == "no_json"
    assert server.requests[0].path == "/v1/chat/completions"
    assert server.requests[0].body["response_format"]["type"] == "json_schema"
    llm.close()


def test_server_fenced_and_prose_json(server: ScriptedServer) -> None:
    server.script.extend(
        [
            answer('```json\n{"lanes": ["journal", "rules"]}\n```'),
            answer('I found two lanes: {"lanes": ["handoff", "rules"]} (from the design card).'),
        ]
    )
    llm = live(server)
    assert extract_json(llm.complete(ASK).text) == {"lanes": ["journal", "rules"]}
    assert extract_json(llm.complete(ASK).text) == {"lanes": ["handoff", "rules"]}
    llm.close()


def test_server_truncated_output(server: ScriptedServer) -> None:
    usage = {"prompt_tokens": 40, "completion_tokens": 16}
    server.script.append(answer('{"lanes": ["journal", "ru', finish_reason="length", usage=usage))
    llm = live(server)
    completion = llm.complete(ASK, json_schema=SCHEMA, max_tokens=16)
    assert completion.truncated and completion.finish_reason == "length"
    assert completion.text == '{"lanes": ["journal", "ru' and completion.usage.total == 56
    assert server.requests[0].body["max_tokens"] == 16
    with pytest.raises(LLMOutputInvalid) as info:
        extract_json(completion.text)
    assert info.value.reason == "truncated"
    llm.close()


def test_server_refusal(server: ScriptedServer) -> None:
    server.script.append(answer("", refusal="I can't help with that request."))
    llm = live(server)
    with pytest.raises(
        LLMUnavailable, match=re.escape("model refused: I can't help with that request.")
    ) as info:
        llm.complete(ASK, json_schema=SCHEMA)
    assert info.value.model == "test-chat" and len(server.requests) == 1
    llm.close()


def test_server_429_retry_after_zero_then_success(server: ScriptedServer) -> None:
    server.script.extend([fail(429, "rate limited", {"Retry-After": "0"}), answer('{"ok": true}')])
    llm = live(server, max_retries=3, retry_max_seconds=5.0)
    assert extract_json(llm.complete(ASK).text) == {"ok": True}
    assert len(server.requests) == 2 and server.requests[0].body == server.requests[1].body
    llm.close()


def test_server_500_until_give_up(server: ScriptedServer) -> None:
    server.default = fail(500, "model overloaded")
    llm = live(server, max_retries=2)
    with pytest.raises(LLMUnavailable) as info:
        llm.complete(ASK)
    assert len(server.requests) == 3
    assert "failed after 3 attempts for model 'test-chat'" in info.value.message
    assert "HTTP 500: model overloaded" in info.value.message
    llm.close()


def test_server_dies_mid_run(server: ScriptedServer) -> None:
    transport = CountingTransport()
    llm = OpenAIChatLLM(
        settings(base_url=server.url, timeout_seconds=1.0, max_retries=2, retry_max_seconds=0.05),
        transport=transport,
    )
    assert extract_json(llm.complete(ASK).text) == {"ok": True}
    server.close()
    with pytest.raises(LLMUnavailable, match="failed after 3 attempts") as info:
        llm.complete(ASK)
    assert transport.calls == 4  # one answered, then max_retries + 1 attempts at a closed port
    assert isinstance(info.value.__cause__, Exception)
    llm.close()


def test_server_model_not_found_is_not_retried(server: ScriptedServer) -> None:
    server.default = fail(404, "model 'llama9:405b' not found, try pulling it first")
    llm = live(server, model="llama9:405b", max_retries=4)
    with pytest.raises(LLMUnavailable) as info:
        llm.complete(ASK, json_schema=SCHEMA)
    assert len(server.requests) == 1
    assert "rejected model 'llama9:405b' (HTTP 404)" in info.value.message
    assert "not found, try pulling it first" in info.value.message
    assert (info.value.model, info.value.status) == ("llama9:405b", 404)
    llm.close()


def test_connection_refused_gives_up() -> None:
    port = closed_port()  # nothing listens on it
    transport = CountingTransport()
    llm = OpenAIChatLLM(settings(base_url=f"http://127.0.0.1:{port}/v1", max_retries=1), transport=transport)
    with pytest.raises(LLMUnavailable, match=r"failed after 2 attempts.*ConnectError"):
        llm.complete(ASK)
    assert transport.calls == 2

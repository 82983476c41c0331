"""Child process for the kill test: organizes the global store slowly with a scripted LLM."""

from __future__ import annotations

import sys

from scripted_llm import ScriptedLLM, installed, item_of

from coffer_memory import MemoryService, Settings


def script(messages):  # type: ignore[no-untyped-def]
    name, text = item_of(messages)
    return {
        "action": "create",
        "target": "",
        "slug": name.removesuffix(".md"),
        "title": name,
        "description": "",
        "body": text,
        "rule": "",
    }


if __name__ == "__main__":
    settings = Settings.load(sys.argv[1], llm={"provider": "scripted"})
    with installed(ScriptedLLM(script, delay=0.03)), MemoryService(settings=settings) as svc:
        print("ready", flush=True)
        svc.organize("global")

"""``make demo``: remember and recall against a throwaway home and git repository.

Run with ``python -m coffer_memory.demo`` (``make demo``). Everything lives in a temporary folder
that is removed at the end (pass ``--keep``, or ``make demo DEMO_ARGS=--keep``, to keep it and look
at the files).
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from . import MemoryService
from ._render import hits_table, stores_table

PROJECT_FACTS = [
    (
        "deploy-via-make-release",
        "This repo deploys via `make release`. Never run `git push --tags` directly: "
        "the release target tags and pushes atomically.",
    ),
    ("test-command", "Run the test suite with `make test`; it creates .venv and installs the dev extras."),
    (
        "db-migrations",
        "Database migrations are managed with alembic; run `alembic upgrade head` before deploying.",
    ),
    ("api-port", "The API server listens on port 8421 in development and behind nginx in production."),
    ("缓存策略", "缓存使用 Redis，键的过期时间为十分钟；部署后需要清空缓存。"),
]
GLOBAL_FACTS = [
    ("python-envs", "The user prefers uv for Python virtual environments in every project."),
    ("commit-style", "Commit messages say why, not what; keep them under 72 characters per line."),
    ("editor", "The user's editor is Neovim; do not add VS Code settings to repositories."),
]
# Three facts an agent remembered in one session: the reply names no word of the question.
SESSION = [
    ("which-staging-port", "Which port should the staging proxy listen on?"),
    ("staging-port-answer", "8443, the same as production, so the certificates match."),
    ("staging-cache", "The staging cache is flushed every night at two."),
]
QUERIES = [
    "how do we deploy this repo?",
    "make test",
    "which port does the api use?",
    "部署之后要做什么？",
    "uv",
]


def _git_repo(root: Path) -> Path:
    repo = root / "acme-api"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True)
    # One commit: its root commit is what identifies the repository after it moves.
    who = ["-c", "user.name=demo", "-c", "user.email=demo@example.invalid", "-c", "commit.gpgsign=false"]
    subprocess.run(["git", "-C", str(repo), *who, "commit", "-q", "--allow-empty", "-m", "init"], check=True)
    return repo


def _show_session_start(home: Path, repo: Path) -> None:
    """What an agent gets at session start: ``coffer-hook`` fed the payload Claude Code sends."""
    import io
    import json

    from ._agents.hook import run

    payload = {"session_id": "demo", "cwd": str(repo), "hook_event_name": "SessionStart", "source": "startup"}
    out = io.StringIO()
    run(["--agent", "claude-code", "--home", str(home)], io.BytesIO(json.dumps(payload).encode()), out)
    bundle = json.loads(out.getvalue())["hookSpecificOutput"]["additionalContext"]
    print(
        "session start: what `coffer-hook --agent claude-code` gives the agent (after `coffer agents install`)"
    )
    print("    " + bundle.strip().replace("\n", "\n    ") + "\n")


def _show_follows(svc: MemoryService, root: Path, repo: Path) -> Path:
    """Move the repository, recall from its new path (the store follows it by its root commit),
    then show the audit trail and an export of the truth files; returns the moved repository."""
    moved = root / "acme-api-moved"
    subprocess.run(["mv", str(repo), str(moved)], check=True)  # as the user would move it
    hit = svc.recall("deploy", cwd=moved, mode="keyword", limit=1)
    print(f"moved {repo.name} -> {moved.name}: recall from the new path still finds the project's memory")
    print(hits_table(hit.hits, text_width=56), "\n")
    events = svc.audit(limit=3).items
    print("the audit log (<home>/audit/, also `coffer audit`), newest first:")
    for e in events:
        print(f"    {e.at:%H:%M:%S}  {e.event:<16}  {e.store}")
    report = svc.export_memory(root / "backup.zip")
    print(
        f"exported {report.files} files of {len(report.stores)} stores to backup.zip "
        f"(`coffer export`; `coffer import` brings it back)\n"
    )
    return moved


def _show_session(svc: MemoryService, repo: Path) -> None:
    """Facts remembered with one session id are recalled with their neighbours."""
    for title, text in SESSION:
        svc.remember(text, title=title, cwd=repo, origin_session_id="demo-chat-1")
    query = "staging proxy port"
    result = svc.recall(query, cwd=repo, mode="keyword", limit=3)
    print("three facts remembered with origin_session_id='demo-chat-1' (`coffer remember --session-id`);")
    print(f"recall {query!r}  mode=keyword: the answer shares no word with it and comes with its question")
    print(hits_table(result.hits, text_width=56), "\n")


def _command(name: str) -> str:
    """How to run one of this environment's console scripts from here (``.venv/bin/coffer``)."""
    path = Path(sys.executable).parent / name
    relative = os.path.relpath(path)
    return relative if not relative.startswith("..") else str(path)


def _next_steps(root: Path, home: Path, repo: Path, kept: bool) -> None:
    coffer = _command("coffer")
    if kept:
        print(f"kept {root}: the files above are yours to read and edit. Try:")
        print(f"    {coffer} --home {shlex.quote(str(home))} recall deploy --cwd {shlex.quote(str(repo))}")
        print(f"    {coffer} --home {shlex.quote(str(home))} stores list")
        print(f"    rm -r {shlex.quote(str(root))}    # when you are done\n")
    else:
        print(f"removed {root} (run the demo with --keep to keep it: make demo DEMO_ARGS=--keep)\n")
    activate = Path(sys.executable).parent / "activate"
    print("next: use coffer in your own repositories (the home is ~/.coffer unless COFFER_HOME is set):")
    if activate.is_file():
        print(f"    source {_command('activate')}    # puts coffer on your PATH; or run {coffer} directly")
    print('    cd ~/your-project && coffer remember "We deploy with make release"')
    print('    coffer recall "how do we deploy?"')
    print("    coffer agents install claude-code    # or codex, opencode: session hooks and the MCP server")
    if importlib.util.find_spec("mcp") is None:  # the demo itself runs without the [mcp] extra
        print("    (the MCP server needs the MCP SDK first: pip install 'coffer-memory[mcp]')")
    print("    coffer --help")


def main(argv: list[str] | None = None) -> int:
    """Run the demo; returns the exit status."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--keep", action="store_true", help="keep the temporary home and repository")
    args = parser.parse_args(argv)
    root = Path(tempfile.mkdtemp(prefix="coffer-demo-"))
    home, repo = root / "home", root / "acme-api"
    try:
        _git_repo(root)
        gone = "kept at the end" if args.keep else "removed at the end unless you pass --keep"
        print(f"coffer home: {home}\nproject:     {repo} (a fresh git repository)\n({gone})\n")
        with MemoryService(home) as svc:
            started = time.perf_counter()
            for title, text in PROJECT_FACTS:
                svc.remember(text, title=title, cwd=repo)
            for title, text in GLOBAL_FACTS:
                svc.remember(text, title=title, scope="global")
            elapsed = (time.perf_counter() - started) * 1000
            print(
                f"remembered {len(PROJECT_FACTS)} project facts and {len(GLOBAL_FACTS)} global facts "
                f"in {elapsed:.1f} ms\n"
            )
            print(stores_table(svc.stores()), "\n")
            first = svc.list_facts(cwd=repo, limit=1).items[0]
            where = first.path if args.keep else first.path.relative_to(home)
            print(f"a fact is a Markdown file you can read and edit ({where} in the home):")
            print("    " + first.path.read_text(encoding="utf-8").replace("\n", "\n    "))
            print(f"grep backend: {svc.retrieval.grep.name}\n")
            for query in QUERIES:
                for mode in ("keyword", "grep"):
                    started = time.perf_counter()
                    result = svc.recall(query, cwd=repo, mode=mode, limit=3)
                    elapsed = (time.perf_counter() - started) * 1000
                    print(f"recall {query!r}  mode={mode}  ({elapsed:.1f} ms)")
                    print(hits_table(result.hits, text_width=56), "\n")
            _show_session(svc, repo)
            svc.append_rule("Run `make lint` before proposing a commit.", cwd=repo)
            svc.append_rule("Answer in short paragraphs.", store="global")
            repo = _show_follows(svc, root, repo)
        _show_session_start(home, repo)
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
    _next_steps(root, home, repo, args.keep)
    return 0


if __name__ == "__main__":
    sys.exit(main())

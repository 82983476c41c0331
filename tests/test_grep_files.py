"""Grep recall's per-file answer (``held``) is the one folding the backends' matching lines gave:
for both built-in backends, over case, Unicode, CJK, regex metacharacters, frontmatter key lines,
long files and files edited by hand after a first search (issue #15 item 7)."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

from coffer_memory import MemoryService, Settings
from coffer_memory import _grep_recall as grep_recall_mod
from coffer_memory._grep_recall import MACHINE_LINE as _MACHINE_LINE
from coffer_memory.plugins import GrepBackend, GrepMatch, get_plugin_manager, hookimpl
from coffer_memory.plugins.builtin import grep as grep_module
from coffer_memory.plugins.builtin.grep import MAX_LINES_PER_FILE, PythonGrepBackend, RipgrepBackend

BACKENDS = [RipgrepBackend, PythonGrepBackend]

PATTERNS = [
    "deploy",
    "café",
    "straße",
    "部署",
    "σας",
    "a.b",
    "(x)+",
    "[y]",
    "$home",
    "^start",
    "c:\\temp",
    "agent",
    "kind",
    "10:30",
    "*.md",
    "x|y",
]


def _corpus(root: Path) -> None:
    """Files that differ from each other only in the awkward ways."""
    deploy_dir = root / "deploy folder"  # a pattern in the path must not count
    deploy_dir.mkdir(parents=True)
    (root / "nested" / "deeper").mkdir(parents=True)
    (root / ".hidden").mkdir()
    files = {
        "case.md": "DEPLOY upper\nDeploy title\nno match\n",
        "unicode.md": "CAFÉ au lait\nSTRASSE is not straße\nΣΑΣ and σας\n",
        "cjk.md": "我们在周五部署服务\n部署\n",
        "meta.md": "literal a.b and (x)+ and [y]\n$HOME at ^start\nC:\\TEMP\\x.md\nx|y and *.md\n",
        "regex-lookalike.md": "axb and a-b\nx and y\n(((x)))+ xx+\n",
        "machine.md": "---\nkind: knowledge\nactor: agent\ncreated_at: 2026-01-01T10:30:00Z\n---\nno words\n",
        "machine-and-body.md": "---\nactor: agent\n---\nthe agent kind of deploys at 10:30\n",
        "indented-key.md": "   kind: deploy\nKind: deploy (not a key: capital K)\n",
        "crlf.md": "deploy on windows\r\nagain DEPLOY\r\n",
        "only-machine-deploy.md": "kind: deploy\nactor: café\n",
        "title-key.md": "---\ntitle: Kind words\ndescription: of café\ntags: [deploy]\nid: agent\n---\n",
        "nested/deeper/n.md": "deep deploy 部署\n",
        "deploy folder/plain.md": "nothing here at all\n",
        "deploy folder/hit.md": "straße\n",
        "late.md": "".join(f"deploy line {i}\n" for i in range(60)) + "café only past the cap\n",
        "late-but-short.md": "deploy\n" * 10 + "café after ten lines\n",
        "long-no-cap.md": "".join(f"line {i}\n" for i in range(70)) + "café far down\n",
        "empty.md": "",
        "notes.txt": "deploy in a text file\n",
        ".dot.md": "deploy in a hidden file\n",
        ".hidden/h.md": "deploy in a hidden folder\n",
    }
    for name, text in files.items():
        (root / name).write_bytes(text.encode("utf-8"))
    (root / "latin1.md").write_bytes(b"caf\xe9 deploy \xff\n")


def _folded(
    backend: GrepBackend, folders: Sequence[Path], patterns: Sequence[str]
) -> dict[str, frozenset[int]]:
    """What retrieval made of ``search``'s lines before ``held``: per file, the union of the
    patterns on its matching lines once frontmatter keys are cut, files holding none left out."""
    out: dict[str, set[int]] = {}
    for m in backend.search(folders, patterns, max_lines=1_000_000):
        rest = _MACHINE_LINE.sub("", m.line, count=1).lower()
        seen = {i for i in m.patterns if patterns[i].lower() in rest}
        if seen:
            out.setdefault(str(m.path), set()).update(seen)
    return {k: frozenset(v) for k, v in out.items()}


@pytest.mark.parametrize("make", BACKENDS, ids=["ripgrep", "python"])
def test_held_is_search_folded(tmp_path: Path, make: Callable[[], GrepBackend]) -> None:
    _corpus(tmp_path / "s")
    backend = make()
    folders = [tmp_path / "s", tmp_path / "absent"]
    for patterns in (PATTERNS, ["deploy"], ["café", "部署"], ["no such words"], ["agent", "kind"]):
        held = backend.held(folders, patterns, skip=_MACHINE_LINE)  # type: ignore[attr-defined]
        assert held == _folded(backend, folders, patterns), patterns


def test_both_backends_hold_the_same_patterns(tmp_path: Path) -> None:
    _corpus(tmp_path / "s")
    rg, py = RipgrepBackend(), PythonGrepBackend()
    held = rg.held([tmp_path / "s"], PATTERNS, skip=_MACHINE_LINE)
    assert held == py.held([tmp_path / "s"], PATTERNS, skip=_MACHINE_LINE)
    s = tmp_path / "s"
    index = {p: i for i, p in enumerate(PATTERNS)}

    def names(*ps: str) -> frozenset[int]:
        return frozenset(index[p] for p in ps)

    assert held[str(s / "case.md")] == names("deploy")
    assert held[str(s / "unicode.md")] == names("café", "straße", "σας")  # "STRASSE" is not "straße"
    assert held[str(s / "cjk.md")] == names("部署")
    assert held[str(s / "meta.md")] == names(
        "a.b", "(x)+", "[y]", "$home", "^start", "c:\\temp", "*.md", "x|y"
    )
    assert str(s / "regex-lookalike.md") not in held  # metacharacters are literal
    assert str(s / "machine.md") not in held  # "agent", "kind", "10:30" only on key lines
    assert held[str(s / "machine-and-body.md")] == names("deploy", "agent", "kind", "10:30")
    assert held[str(s / "indented-key.md")] == names("deploy", "kind")  # "Kind:" is not a key line
    assert str(s / "only-machine-deploy.md") not in held
    assert held[str(s / "title-key.md")] == names("kind", "café")  # a title's words, not its key nor tags
    assert held[str(s / "crlf.md")] == names("deploy")
    assert held[str(s / "nested" / "deeper" / "n.md")] == names("deploy", "部署")
    assert str(s / "deploy folder" / "plain.md") not in held  # the folder's name does not count
    assert held[str(s / "deploy folder" / "hit.md")] == names("straße")
    # The first MAX_LINES_PER_FILE matching lines of a file count, as in ``search``.
    assert held[str(s / "late.md")] == names("deploy")
    assert held[str(s / "late-but-short.md")] == names("deploy", "café")
    assert held[str(s / "long-no-cap.md")] == names("café")
    assert str(s / "latin1.md") in held and not any(k.endswith((".txt", "h.md", ".dot.md")) for k in held)
    assert MAX_LINES_PER_FILE < 60


def test_held_follows_files_edited_by_hand(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A file changed after a search (even keeping its size and mtime) is read again."""
    monkeypatch.setattr(grep_module, "RACY_NS", 0)  # keep every file's text, as an old file's
    note = tmp_path / "note.md"
    note.write_text("the deploy runs at noon\n")
    backends = [RipgrepBackend(), PythonGrepBackend()]
    for b in backends:
        assert b.held([tmp_path], ["deploy", "rollback"], skip=_MACHINE_LINE) == {str(note): frozenset({0})}
    before = note.stat()
    note.write_text("the rollback at noon!!!\n")  # same size
    os.utime(note, ns=(before.st_atime_ns, before.st_mtime_ns))
    for b in backends:
        assert b.held([tmp_path], ["deploy", "rollback"], skip=_MACHINE_LINE) == {str(note): frozenset({1})}
    note.write_text("---\nactor: rollback\n---\nquiet\n")  # the word now only on a key line
    for b in backends:
        assert b.held([tmp_path], ["deploy", "rollback"], skip=_MACHINE_LINE) == {}


class _LinesOnly:
    """A third-party style backend: ``search`` only (the ripgrep backend's lines)."""

    name = "lines-only"
    priority = 0

    def available(self) -> bool:
        return True

    def search(self, folders: Sequence[Path], patterns: Sequence[str], *, max_lines: int) -> list[GrepMatch]:
        return RipgrepBackend().search(folders, patterns, max_lines=max_lines)


class _LinesOnlyPlugin:
    @hookimpl
    def register_grep_backends(self, register: Callable[[object], None]) -> None:
        register(_LinesOnly())


QUERIES = [
    "deploy",
    "DEPLOY the API",
    "café",
    "部署",
    "a.b (x)+",
    "agent kind",
    "what time is the 10:30 deploy?",
    "$HOME",
    "nothing matches this",
]


def test_recall_is_the_same_through_held_and_through_lines(tmp_home: Path, repo: Path) -> None:
    """Grep recall through either built-in ``held`` and through a lines-only backend gives the
    same hits in the same order, also after facts are edited by hand (same size, new words)."""
    texts = [
        "Deploy the API with make release at 10:30",
        "the deploy agent of this kind",
        "café and 部署 notes",
        "literal a.b and (x)+ here",
        "$HOME is set by the shell; deploy later",
        "deploy deploy deploy",
        "twin note about deploy",
        "twin note about deploy",
    ]
    get_plugin_manager().register(_LinesOnlyPlugin(), name="lines-only-test")
    try:
        with MemoryService(settings=Settings.load(tmp_home)) as svc:
            facts = [svc.remember(t, cwd=repo) for t in texts]
            svc.remember("a global deploy note", scope="global")

        def answers() -> dict[str, list[list[tuple[str, float]]]]:
            out: dict[str, list[list[tuple[str, float]]]] = {}
            for name in ("ripgrep", "python", "lines-only"):
                with MemoryService(settings=Settings.load(tmp_home, grep_backend=name)) as svc:
                    out[name] = [
                        [(h.id, h.score) for h in svc.recall(q, cwd=repo, mode="grep", limit=5).hits]
                        for q in QUERIES
                    ]
            return out

        first = answers()
        assert first["ripgrep"] == first["python"] == first["lines-only"]
        assert first["ripgrep"][0] and first["ripgrep"][2]
        edited = facts[2].path
        text = edited.read_text()
        edited.write_text(text.replace("café and 部署 notes", "rollback a.b notes!"))
        second = answers()
        assert second["ripgrep"] == second["python"] == second["lines-only"]
        assert facts[2].fact.id not in [i for i, _ in second["ripgrep"][2]]  # "café" is gone
    finally:
        get_plugin_manager().unregister(name="lines-only-test")


def test_grep_recall_keeps_every_file_past_the_line_bound(
    tmp_home: Path, repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With many matching lines, the built-in backends still rank every matching file (the line
    bound cut files in the order rg's threads printed them, so which ones was left to chance)."""
    monkeypatch.setattr(grep_recall_mod, "GREP_MAX_LINES", 3)
    with MemoryService(settings=Settings.load(tmp_home)) as svc:
        for i in range(12):
            svc.remember(f"deploy note {i}" + (" rollback" if i == 11 else ""), cwd=repo)
    for name in ("ripgrep", "python"):
        with MemoryService(settings=Settings.load(tmp_home, grep_backend=name)) as svc:
            hits = svc.recall("deploy rollback", cwd=repo, mode="grep", limit=20).hits
            assert len(hits) == 12, name
            assert hits[0].text.startswith("deploy note 11"), name


def test_equal_scores_are_ordered_newest_first_then_by_path(tmp_home: Path, repo: Path) -> None:
    """Files of equal score and time come in path order, whatever order the backend found them."""
    with MemoryService(settings=Settings.load(tmp_home)) as svc:
        svc.remember("same words, older", cwd=repo)
        inbox = svc.paths(svc.resolve_store(cwd=repo)).inbox
    for name in ("c", "a", "d", "b"):  # hand-written notes, one mtime
        (inbox / f"{name}.md").write_text("same words\n")
        os.utime(inbox / f"{name}.md", ns=(2_000_000_000_000_000_000, 2_000_000_000_000_000_000))
    for name in ("ripgrep", "python"):
        with MemoryService(settings=Settings.load(tmp_home, grep_backend=name)) as svc:
            hits = svc.recall("same words", cwd=repo, mode="grep", limit=20).hits
            assert [h.path.name for h in hits[:4]] == ["a.md", "b.md", "c.md", "d.md"], name
            assert len({(h.score, h.time) for h in hits[:4]}) == 1 and len(hits) == 5, name


@pytest.mark.skipif(not RipgrepBackend().available(), reason="compares with ripgrep")
def test_auto_greps_kept_texts_after_the_first_search_with_rgs_answers(
    tmp_home: Path, repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The default backend greps with rg once, then searches the texts it keeps (their feed armed
    at once): its hits stay a pure rg service's through edits by hand (in place keeping size and
    mtime too), a new file and a deleted one."""
    monkeypatch.setattr(grep_module, "RACY_NS", 0)  # keep every text, as an old file's
    texts = ["Deploy the API at 10:30", "café and 部署 notes", "the deploy agent", "$HOME later deploy"]
    with MemoryService(settings=Settings.load(tmp_home)) as svc:
        facts = [svc.remember(t, cwd=repo) for t in texts]
        svc.remember("a global deploy note", scope="global")
    auto = MemoryService(settings=Settings.load(tmp_home))
    rg = MemoryService(settings=Settings.load(tmp_home, grep_backend="ripgrep"))

    def same() -> list[list[tuple[str, float, str]]]:
        answers = []
        for svc in (auto, rg):
            answers.append(
                [
                    [(h.id, h.score, h.text) for h in svc.recall(q, cwd=repo, mode="grep", limit=5).hits]
                    for q in QUERIES
                ]
            )
        assert answers[0] == answers[1]
        return answers[0]

    try:
        assert same()[0]
        backend = auto.index.retrieval.grep.resolve()  # type: ignore[attr-defined]
        assert isinstance(backend, grep_module.AutoGrepBackend) and backend.kept is not None
        assert rg.index.retrieval.grep.resolve().name == backend.name == "ripgrep"  # type: ignore[attr-defined]
        store = facts[0].path.parent.parent.parent
        assert backend.kept._watched.listing(str(store), ["knowledge", "journal"]) is not None  # vouched
        path = facts[1].path
        st = path.stat()
        data = path.read_bytes().replace("café".encode(), b"rollb")  # "café" is 5 bytes
        assert len(data) == st.st_size
        path.write_bytes(data)
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
        assert facts[1].fact.id not in [i for i, _, _ in same()[2]]
        (path.parent / "by-hand.md").write_text("café deploy written by hand\n")
        facts[0].path.unlink()
        after = same()
        assert facts[0].fact.id not in [i for i, _, _ in after[0]] and any(
            "by hand" in t for _, _, t in after[2]
        )
    finally:
        auto.close()
        rg.close()


def test_a_walk_never_searches_a_kept_text_its_file_no_longer_has(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The pure-Python backend searches its kept texts in one buffer: a file edited so recently that
    its new text is not kept, or swapped for a symlink or a FIFO, must not answer with its old text."""
    monkeypatch.setattr(grep_module, "RACY_NS", 0)  # the first search keeps every text
    notes = [tmp_path / f"n{i}.md" for i in range(3)]
    for note in notes:
        note.write_text("the deploy runs at noon\n")
    backend = PythonGrepBackend()
    assert len(backend.held([tmp_path], ["deploy"], skip=_MACHINE_LINE)) == 3
    monkeypatch.setattr(grep_module, "RACY_NS", 10**18)  # nothing is old enough to keep now
    notes[0].write_text("the rollback runs at noon\n")
    elsewhere = tmp_path.parent / f"{tmp_path.name}-elsewhere.md"
    elsewhere.write_text("deploy outside\n")
    notes[1].unlink()
    notes[1].symlink_to(elsewhere)
    notes[2].unlink()
    os.mkfifo(notes[2])
    held = backend.held([tmp_path], ["deploy", "rollback"], skip=_MACHINE_LINE)
    assert held == {str(notes[0]): frozenset({1})}
    backend.close()


def test_grep_recall_searches_what_a_person_wrote_not_frontmatter(tmp_home: Path, repo: Path) -> None:
    """A query word that is a frontmatter key ("tags", "title", "created", "id") or only in a
    key's machine value (a tag, a date) matches no fact, as in keyword recall; a title's words
    still match. The same through every backend (the new-user pass of session 11)."""
    get_plugin_manager().register(_LinesOnlyPlugin(), name="lines-only-test")
    try:
        with MemoryService(settings=Settings.load(tmp_home)) as svc:
            tagged = svc.remember("Deploys go through make release", cwd=repo, tags=["ops"])
            svc.remember("The coffee machine is on floor two", title="Kitchen notes", cwd=repo)
            (tagged.path.parent / "by-hand.md").write_text(
                "---\nid: 01HANDWRITTEN\ntitle: Onboarding\n---\n\nAsk for a badge on day one.\n"
            )
            svc.reindex()
        keys = ["tags", "title", "description", "created", "updated", "id", "2026", "ops", "null", "metadata"]
        for name in ("ripgrep", "python", "lines-only"):
            with MemoryService(settings=Settings.load(tmp_home, grep_backend=name)) as svc:
                for word in keys:
                    hits = svc.recall(word, cwd=repo, mode="grep").hits
                    assert not hits, (name, word, [h.title for h in hits])
                    assert not svc.recall(word, cwd=repo, mode="keyword").hits, (name, word)
                for words, title in (("kitchen", "Kitchen notes"), ("onboarding", "Onboarding")):
                    assert [h.title for h in svc.recall(words, cwd=repo, mode="grep").hits] == [title], name
    finally:
        get_plugin_manager().unregister(name="lines-only-test")

"""What a new user met in a week of use (session 16's newuser7), each fixed and kept fixed.

Each test failed on the code before its fix (the docstring says what it saw then).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from conftest import CliRunner, git, make_repo

from coffer_memory import MemoryService


def test_an_empty_title_or_description_in_an_edit_is_derived_from_the_text(svc: MemoryService) -> None:
    """``edit_fact(title="")`` kept the old title and still rewrote the file (a new
    ``updated_at``); ``description=""`` wrote an empty description, where ``remember`` derives
    both from the text when they are empty."""
    r = svc.remember(
        "Deploy with make ship.\nStaging needs the VPN.",
        title="Deploying",
        description="How we ship",
        scope="global",
    )
    edited = svc.edit_fact(r.fact.id, title="", description="  ", scope="global")
    assert edited.fact.title == "Deploy with make ship."
    assert edited.fact.description == "Deploy with make ship. Staging needs the VPN."
    again = svc.get_fact(r.fact.id, scope="global").fact
    assert (again.title, again.description) == (edited.fact.title, edited.fact.description)
    # A new body with an empty title: the title of the new text.
    edited = svc.edit_fact(r.fact.id, body="# Ship it\n\nwith make ship", title="", scope="global")
    assert edited.fact.title == "Ship it"
    # None keeps what the fact has.
    kept = svc.edit_fact(r.fact.id, body="other text", scope="global")
    assert kept.fact.title == "Ship it"


def test_the_cli_edit_with_an_empty_title_takes_it_from_the_text(cli: CliRunner, tmp_path: Path) -> None:
    """``coffer facts edit ID --title ""`` printed "edited" and kept the title."""
    repo = make_repo(tmp_path / "acme")
    out = cli("remember", "The API listens on port 8421.", "--title", "port", "--json", cwd=repo)
    assert out.returncode == 0, out.stderr

    fact_id = json.loads(out.stdout)["fact"]["id"]
    res = cli("facts", "edit", fact_id, "--title", "", "--json", cwd=repo)
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["fact"]["title"] == "The API listens on port 8421."


def test_an_id_of_bytes_that_are_not_utf8_is_named_in_the_error(cli: CliRunner, tmp_path: Path) -> None:
    """``coffer facts show $'\\xff\\xfe'`` said ``memory '' not found``: the undecodable bytes of
    the argument (surrogate escapes) were dropped as control characters. They read as ``\\xNN`` now,
    as a branch name's do."""
    repo = make_repo(tmp_path / "acme")
    assert cli("remember", "A fact, so that the home exists.", cwd=repo).returncode == 0
    res = cli("facts", "show", "\udcff\udcfe", cwd=repo)
    assert res.returncode == 1
    # The message quotes the id as Python's repr does, so each backslash shows doubled there.
    assert "MEMORY_NOT_FOUND: memory '\\\\xff\\\\xfe' not found" in res.stderr
    res = cli("facts", "show", "ab\udce9", "--json", cwd=repo)
    assert json.loads(res.stderr)["error"]["details"]["fact_id"] == "ab\\xe9"


def test_the_consolidation_log_header_says_it_logs_deletes_too(svc: MemoryService, tmp_path: Path) -> None:
    """A store whose only log lines were ``deleted: ...`` had a log headed "One line per change the
    organizer made to this store", which no organizer had touched."""
    repo = make_repo(tmp_path / "acme")
    svc.journal_append("Shipped the billing migration.", cwd=repo)
    day = svc.journal(cwd=repo)[0].period
    svc.delete_journal(day, cwd=repo)
    text = svc.consolidation_log(cwd=repo).text
    assert text is not None and f"deleted: journal/{day}" in text
    assert "and per lane file deleted" in text.splitlines()[2]


def test_tiny_keyword_scores_read_as_numbers_beside_the_others(svc: MemoryService) -> None:
    """In a store of many like facts a keyword recall's tail scored ``4.125e-06`` beside ``52.26``
    at the top, in the CLI's table and the notebook's: exponent form, which reads as larger at a
    glance. Scores keep four significant digits and are written out."""
    from coffer_memory._render import hits_table

    for i in range(40):
        svc.remember(f"Service {i} listens on port {8000 + i}.", title=f"service-{i}", scope="global")
    res = svc.recall("service 42 port 8042", stores=["global"], limit=20)
    assert any(0 < h.score < 1e-4 for h in res.hits), [h.score for h in res.hits]  # the case itself
    shown = hits_table(res.hits) + res._repr_markdown_() + res._repr_html_()
    assert not re.search(r"\d[eE][-+]\d", shown), shown
    tiny = min(h.score for h in res.hits if h.score > 0)
    digits = f"{tiny:.3e}".split("e")[0].replace(".", "").rstrip("0")  # 7.125e-06: "7125"
    assert re.search(rf"\b0\.0000+{digits}\b", shown), (tiny, shown)


def test_a_labelled_store_is_still_named_by_its_repository_folder(cli: CliRunner, tmp_path: Path) -> None:
    """Once ``coffer stores label`` gave a store a label, its repository folder's name (which
    ``--store`` and every ``stores`` command take, says their help) was MEMORY_STORE_NOT_FOUND:
    the folder name was only matched as the display name, which the label replaces."""
    repo = make_repo(tmp_path / "acme")
    assert cli("remember", "Deploy with make release.", cwd=repo).returncode == 0
    name = json.loads(cli("stores", "list", "--json").stdout)[0]["name"]
    assert cli("stores", "label", name, "billing").returncode == 0
    by_folder = cli("stores", "config", "acme", "max_fact_chars", "4000")
    assert by_folder.returncode == 0, by_folder.stderr
    assert cli("stores", "config", "billing", "--json").returncode == 0  # the label, as before
    listed = cli("facts", "list", "--store", "acme", "--json", cwd=tmp_path)
    assert listed.returncode == 0 and len(json.loads(listed.stdout)["items"]) == 1


def test_a_worktree_whose_main_checkout_moved_gets_no_misleading_hint(cli: CliRunner, tmp_path: Path) -> None:
    """In a linked worktree whose main checkout moved, ``coffer recall`` said what to run (``git
    worktree repair``) and then ``hint: run it inside a git repository, or pass --cwd DIR of one``,
    though it was run inside one."""
    main = make_repo(tmp_path / "acme-api")
    assert cli("remember", "Deploy with make release.", cwd=main).returncode == 0
    git(main, "worktree", "add", "-q", str(tmp_path / "acme-login"), "-b", "feature/login")
    main.rename(tmp_path / "acme")
    res = cli("recall", "deploy", cwd=tmp_path / "acme-login")
    assert res.returncode == 1 and "git worktree repair" in res.stderr
    assert "hint:" not in res.stderr and "run it inside a git repository" not in res.stderr


def test_the_async_facade_takes_a_home_path_as_memory_service_does(tmp_path: Path) -> None:
    """``AsyncMemoryService("/path/to/home")``, written as one writes ``MemoryService(home)``,
    failed at the first call with ``AttributeError: 'str' object has no attribute '_gate'``. A
    path opens a service of the facade's own there (closed with it); anything else is refused at
    once, by name."""
    import asyncio

    import pytest

    from coffer_memory import AsyncMemoryService, InvalidInput, ServiceClosed

    home = tmp_path / "home"

    async def use(where: str | Path) -> str:
        asvc = AsyncMemoryService(where)
        await asvc.remember("Backups run at 02:00 UTC.", scope="global")
        hits = await asvc.recall("backups", stores=["global"])
        await asvc.close()
        with pytest.raises(ServiceClosed):  # its own service: closed with the facade
            await asvc.recall("backups", stores=["global"])
        return hits.hits[0].text

    assert asyncio.run(use(str(home))) == "Backups run at 02:00 UTC."
    assert asyncio.run(use(home)) == "Backups run at 02:00 UTC."
    assert (home / "memory" / "global" / "knowledge" / "inbox").is_dir()
    with pytest.raises(
        InvalidInput, match="service must be a MemoryService or a coffer home's path, not int"
    ):
        AsyncMemoryService(42)  # type: ignore[arg-type]

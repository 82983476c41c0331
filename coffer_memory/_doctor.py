"""``coffer doctor``: the index compared with the files, odd and broken files, repairs, the grep backend.

It reads no file itself: reconcile (which every store listing runs first) has already recorded
the files it could not index, with the reason, so a FIFO, a 50 MB file or an alias bomb is
named here without being opened again.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import apsw

from ._index import later
from ._index.db import DAMAGE
from ._index.vec import paused_in
from ._indexing import IndexHandle
from ._models import BrokenFile, DoctorReport, StoreInfo
from ._store.folder import FOLDER_FILE
from ._store.paths import StorePaths, is_recall_rel
from ._store.scan import OddFiles, printable, scan_markdown
from .plugins.builtin.grep import find_ripgrep
from .vocabulary import MCP_PROBE_TIMEOUT_SECONDS

if TYPE_CHECKING:
    from ._agents.homes import AgentHomes
    from ._agents.install import AgentStatus


def run_doctor(
    home: Path, index: IndexHandle, paths: Sequence[StorePaths], infos: Sequence[StoreInfo]
) -> DoctorReport:
    """Check every store (``paths[i]`` belongs to ``infos[i]``, already reconciled as any read does).

    Damage SQLite reports while checking is repaired (moved aside, rebuilt) and the check rerun.
    """
    try:
        return _check(home, index, paths, infos)
    except DAMAGE as exc:
        index.db.note_damage(exc)
        index.reconciler.repair()
        return _check(home, index, paths, infos)


def _check(
    home: Path, index: IndexHandle, paths: Sequence[StorePaths], all_infos: Sequence[StoreInfo]
) -> DoctorReport:
    broken: list[BrokenFile] = []
    mismatches: list[str] = []
    db = index.db
    # A store folder linked to another store's is a link like those inside a store: listed, not
    # followed (its files are the other store's, listed there).
    linked = [sp.root for sp in paths if sp.linked_store() is not None]
    paths = [sp for sp in paths if sp.root not in linked]
    infos = [info for info in all_infos if info.store_dir not in linked]
    for info, sp in zip(infos, paths, strict=True):
        odd: OddFiles = {}
        files, _ = scan_markdown(sp.root, sp.recall_dirs(), odd)
        for rel, reason in sorted(odd.items()):
            broken.append(BrokenFile(store=info.name, path=sp.root / printable(rel), error=reason))
        bad = db.rows("SELECT path, error FROM broken_files WHERE resource_name = ?", (info.name,))
        broken += [BrokenFile(store=info.name, path=db.file(p), error=e) for p, e in sorted(bad)]
        prefix = db.key(sp.root) + "/"
        on_disk = {prefix + rel for rel in files if is_recall_rel(rel)} - {str(r[0]) for r in bad}
        rows = db.rows("SELECT path FROM documents WHERE resource_name = ?", (info.name,))
        indexed = {str(r[0]) for r in rows}
        mismatches += [f"{info.name}: not indexed: {db.file(p)}" for p in sorted(on_disk - indexed)]
        mismatches += [
            f"{info.name}: indexed but missing on disk: {db.file(p)}" for p in sorted(indexed - on_disk)
        ]
    return DoctorReport(
        home=home,
        grep_backend=index.retrieval.grep.name,
        ripgrep_path=find_ripgrep(),
        sqlite_version=apsw.sqlite_lib_version(),
        stores=tuple(all_infos),
        broken=tuple(broken),
        index_mismatches=tuple(mismatches),
        index_repairs=tuple(db.repairs()),
        links=(*linked, *(link for sp in paths for link in store_links(sp.root))),
        hard_links=tuple(line for sp in paths for line in hard_links(sp.root)),
        vector_problem=index.vector_problem(),
        shared_index=shared_index(index),
        embedder=embedder_in_use(index),
        vectors_waiting=tuple(line for info in infos if (line := vectors_waiting(index, info.name))),
    )


def vectors_waiting(index: IndexHandle, store: str) -> str | None:
    """How many documents of ``store`` wait for their vectors, and why; None when none do (or
    no embedder runs: ``vector_problem`` says that)."""
    if index.vectors is None:
        return None
    db = index.db
    count = later.count_waiting(db, store)
    if not count:
        return None
    waiting = f"{store}: " + (
        f"{count} documents wait for their" if count != 1 else "1 document waits for its"
    )
    waiting += " vectors"
    if paused_in(db):
        return f"{waiting}: the embedder failed; it is tried again a minute after the failure"
    who = later.claimed_by(db, store)
    if who is not None:
        host, pid, _ = who.rsplit(" ", 2)
        return f"{waiting}: process {pid} on {host} is embedding them"
    return f"{waiting}: the next read embeds them"


def embedder_in_use(index: IndexHandle) -> str | None:
    """The embedder's provider, model and width, as ``coffer doctor`` prints it: a plugin's
    author saw nothing saying that the plugin's embedder was the one in use."""
    vectors = index.vectors
    if vectors is None:
        return None
    embedder = vectors.embedder
    provider = index.settings.embedding.provider
    name = getattr(embedder, "name", provider) if provider == "auto" else provider
    return f"{name} (model {embedder.model_id}, {embedder.dimensions} dimensions)"


def shared_index(index: IndexHandle) -> str | None:
    """The shared backend and the memory folder it follows (docs/team.md); None without one.
    A home whose folder is not the one the database follows never gets here: opening the index
    refuses it (``IndexFolderMismatch``, which ``coffer doctor`` prints)."""
    backend = index.backend
    if backend is None:
        return None
    if not hasattr(backend, "folder_id"):
        return backend.name
    folder = getattr(backend, "folder_id", None)
    if folder is None:
        return f"{backend.name}: bound to no memory folder yet (a writing member's first start binds it)"
    return f"{backend.name}: follows this memory folder ({FOLDER_FILE} id {folder})"


def store_links(root: Path) -> list[Path]:
    """Every symbolic link under a store folder (files and folders; none is ever followed)."""
    found: list[Path] = []
    for folder, dirs, files in os.walk(root):
        for name in sorted(dirs + files):
            path = Path(folder) / name
            try:
                linked = path.is_symlink()
            except OSError:  # nested past PATH_MAX (os.walk goes on below it): the scan lists it
                continue
            if linked:
                found.append(path)
    return found


def hard_links(root: Path) -> list[str]:
    """Each Markdown file under a store folder that has other names (hard links), as a line.

    Not refused: a link needs write access to the store, grants no read its maker did not have
    (``fs.protected_hardlinks``), and stores hold them for good reasons (``cp -al`` or rsnapshot
    backups, sync tools). Said so that a file sharing its text with one outside the store is
    seen; coffer writes it by rename, and appends to a linked lane file by rename too, so the
    other names keep their text (``lanes.append_bytes``).
    """
    found: list[str] = []
    for folder, _, files in os.walk(root):
        for name in sorted(files):
            if not name.endswith(".md"):
                continue
            try:
                st = os.lstat(os.path.join(folder, name))
            except OSError:  # gone since the listing
                continue
            if stat.S_ISREG(st.st_mode) and st.st_nlink > 1:
                others = st.st_nlink - 1
                found.append(
                    f"{Path(folder, name)}: {others} other name{'s' if others > 1 else ''} "
                    "(a hard link) share its text; coffer's writes give the store its own copy"
                )
    return found


def check_agents(
    list_agents: Callable[..., list[AgentStatus]] | None,
    homes: AgentHomes | None = None,
    projects: Sequence[Path] = (),
    timeout: float = MCP_PROBE_TIMEOUT_SECONDS,
) -> dict[str, tuple[str, ...]]:
    """Every agent coffer is installed for: start its registered MCP server (each distinct one once)
    and ask it ``initialize`` + ``tools/list`` (``timeout`` seconds to answer); hooks the agent has not trusted yet; stale entries;
    a project's own ``coffer`` MCP entry that the agent runs instead of coffer's in one of
    ``projects`` (the current directory, the repositories of the home's stores), as ``coffer
    agents status`` reports it for one directory.

    ``list_agents`` is the service's ``agents`` method. Returns the report's ``agents`` and
    ``agent_problems`` fields.
    """
    lines: list[str] = []
    problems: list[str] = []
    for status in list_agents(check_mcp=True, timeout=timeout) if list_agents is not None else ():
        if not (status.installed or status.mcp_registered):
            continue
        found = [f"{status.name}: {t.describe()}" for t in status.hook_review if t.state != "trusted"]
        if status.mcp_check is not None and not status.mcp_check.ok:
            found.append(
                f"{status.name}: MCP server {' '.join(status.mcp_check.command)} {status.mcp_check.summary()}"
            )
        if status.installed and not status.up_to_date:
            found.append(f"{status.name}: out of date: run `coffer agents install {status.name}` again")
        found += [f"{status.name}: {note}" for note in _shadow_notes(status, homes, projects)]
        problems += found
        check = status.mcp_check
        lines.append(
            f"{status.name}: " + (f"MCP server {check.summary()}" if check and check.ok else "not working")
        )
    return {"agents": tuple(lines), "agent_problems": tuple(problems)}


def _shadow_notes(status: AgentStatus, homes: AgentHomes | None, projects: Sequence[Path]) -> list[str]:
    """One note per project-level entry that replaces coffer's for ``status``'s agent, each entry
    once (a project and a folder in it find the same), naming the project it was found from."""
    from ._agents.homes import AgentHomes
    from ._agents.shadows import mcp_shadows

    homes = homes or AgentHomes.from_env()
    found: dict[object, str] = {}
    for project in projects:
        for shadow in mcp_shadows(status.name, homes, project):
            found.setdefault(shadow, shadow.describe(status.label, project))
    return list(found.values())

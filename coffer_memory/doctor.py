"""``coffer doctor``: the index compared with the files, odd and broken files, repairs, the grep backend.

It reads no file itself: reconcile (which every store listing runs first) has already recorded
the files it could not index, with the reason, so a FIFO, a 50 MB file or an alias bomb is
named here without being opened again.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import apsw

from .index.db import DAMAGE
from .models import BrokenFile, DoctorReport
from .plugins.builtin.grep import find_ripgrep
from .store.files import OddFiles, printable, scan_markdown
from .store.paths import is_recall_rel

if TYPE_CHECKING:
    from .agents.install import AgentStatus
    from .stores import StoresMixin


def run_doctor(svc: StoresMixin) -> DoctorReport:
    """Check every store of ``svc``'s home (reconciling it first, as any read does).

    Damage SQLite reports while checking is repaired (moved aside, rebuilt) and the check rerun.
    """
    try:
        return _check(svc)
    except DAMAGE as exc:
        svc.db.note_damage(exc)
        svc.reconciler.repair()
        return _check(svc)


def _check(svc: StoresMixin) -> DoctorReport:
    broken: list[BrokenFile] = []
    mismatches: list[str] = []
    infos = svc.stores()
    db = svc.db
    for info in infos:
        sp = svc.paths(info.name)
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
        home=svc.home,
        grep_backend=svc.retrieval.grep.name,
        ripgrep_path=find_ripgrep(),
        sqlite_version=apsw.sqlite_lib_version(),
        stores=tuple(infos),
        broken=tuple(broken),
        index_mismatches=tuple(mismatches),
        **check_agents(getattr(svc, "agents", None)),
        index_repairs=tuple(db.repairs()),
    )


def check_agents(list_agents: Callable[..., list[AgentStatus]] | None) -> dict[str, tuple[str, ...]]:
    """Every agent coffer is installed for: start its registered MCP server (each distinct one once)
    and ask it ``initialize`` + ``tools/list``; hooks the agent has not trusted yet; stale entries.

    ``list_agents`` is the service's ``agents`` method. Returns the report's ``agents`` and
    ``agent_problems`` fields.
    """
    lines: list[str] = []
    problems: list[str] = []
    for status in list_agents(check_mcp=True) if list_agents is not None else ():
        if not (status.installed or status.mcp_registered):
            continue
        found = [f"{status.name}: {t.describe()}" for t in status.hook_review if t.state != "trusted"]
        if status.mcp_check is not None and not status.mcp_check.ok:
            found.append(
                f"{status.name}: MCP server {' '.join(status.mcp_check.command)} {status.mcp_check.summary()}"
            )
        if status.installed and not status.up_to_date:
            found.append(f"{status.name}: out of date: run `coffer agents install {status.name}` again")
        problems += found
        check = status.mcp_check
        lines.append(
            f"{status.name}: " + (f"MCP server {check.summary()}" if check and check.ok else "not working")
        )
    return {"agents": tuple(lines), "agent_problems": tuple(problems)}

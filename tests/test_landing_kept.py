"""A moved checkout's store (``Targets._landing``) is kept between recalls, and never past a change.

A checkout whose own store does not exist (the repository moved, the move recorded in its old
store's ``merged_identities``) lands in that store on every recall; working that out reads every
project store's ``store.json``. The answer is kept while the ``projects`` folder and each
``store.json`` keep their stat: a store made, removed, or its file rewritten by another process is
seen by the next recall, which then answers as a fresh service does.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from coffer_memory import MemoryService
from coffer_memory._scope import project_id_for
from coffer_memory._store.identity import STORE_FILE
from coffer_memory._store.paths import store_name_for_project
from tests.conftest import make_repo

# Past ``_scope._RACY_NS``: a file changed more recently than this is never vouched for by its stat.
_PAST_RACY = 2.1


def _texts(svc: MemoryService, query: str, cwd: Path) -> list[str]:
    return sorted(h.text for h in svc.recall(query, cwd=cwd, mode="keyword").hits)


def _moved(svc: MemoryService, tmp_path: Path) -> tuple[str, Path]:
    """A repository with a fact, moved; the move recorded by a first recall from its new place."""
    repo = make_repo(tmp_path / "repo")
    store = svc.remember("the staging database is called heron", cwd=repo).store
    moved = repo.rename(tmp_path / "moved")
    assert any("heron" in t for t in _texts(svc, "heron", moved))  # records the move
    assert (
        project_id_for(moved)
        in json.loads((svc.paths(store).root / STORE_FILE).read_text())["merged_identities"]
    )
    return store, moved


def _run(code: str, *args: str) -> str:
    done = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout


_COUNT_OPENS = """
import sys
from pathlib import Path
from coffer_memory import MemoryService

home, cwd = Path(sys.argv[1]), Path(sys.argv[2])
opened = []
with MemoryService(home) as svc:
    for _ in range(2):
        assert svc.recall("heron", cwd=cwd, mode="keyword").hits
    sys.addaudithook(lambda event, args: opened.append(args[0]) if event == "open" else None)
    hits = svc.recall("heron", cwd=cwd, mode="keyword").hits
assert any("heron" in h.text for h in hits)
print(sum(1 for p in opened if str(p).endswith("store.json")))
"""


def test_a_repeated_recall_from_a_moved_checkout_reads_no_store_file(tmp_home: Path, tmp_path: Path) -> None:
    with MemoryService(tmp_home) as svc:
        _moved(svc, tmp_path)
    time.sleep(_PAST_RACY)
    # In another process (its audit hook goes with it): the third recall opens no store.json.
    assert _run(_COUNT_OPENS, str(tmp_home), str(tmp_path / "moved")).strip() == "0"


_DROP = """
import json, sys
path = sys.argv[1]
data = json.loads(open(path).read())
data["merged_identities"] = []
with open(path, "w") as fh:  # in place, as an editor without a rename writes
    fh.write(json.dumps(data))
"""

_OWN = """
import sys
from pathlib import Path
from coffer_memory import MemoryService

with MemoryService(Path(sys.argv[1])) as svc:
    svc.remember("the staging database is called kestrel now", store=sys.argv[2])
"""

_CLAIM = """
import json, sys
from pathlib import Path

folder, old = Path(sys.argv[1]), Path(sys.argv[2])
folder.mkdir(parents=True)
data = json.loads(old.read_text())
(folder / "store.json").write_text(json.dumps(data))
"""


@pytest.mark.parametrize("change", ["identity_dropped", "own_store_made", "another_store_claims_it"])
def test_the_kept_landing_never_outlives_what_it_read(tmp_home: Path, tmp_path: Path, change: str) -> None:
    with MemoryService(tmp_home) as svc:
        store, moved = _moved(svc, tmp_path)
        time.sleep(_PAST_RACY)
        assert svc.target(cwd=moved).store == store
        assert any("heron" in t for t in _texts(svc, "heron", moved))  # the landing kept from here
        assert svc.recall("heron", cwd=moved, mode="keyword").targets[0].store == store
        own = store_name_for_project(project_id_for(moved))
        if change == "identity_dropped":
            _run(_DROP, str(svc.paths(store).root / STORE_FILE))
            expected_store, heron = own, False
        elif change == "own_store_made":
            _run(_OWN, str(tmp_home), own)
            expected_store, heron = own, False
        else:
            # A store whose folder sorts before the landing's lists the moved checkout too: the
            # first one listing it is where the checkout lands (``find_landing``).
            first = svc.paths(store).root.parent / "00000000000000000000000000"
            _run(_CLAIM, str(first), str(svc.paths(store).root / STORE_FILE))
            expected_store, heron = store_name_for_project(first.name), False
        result = svc.recall("heron", cwd=moved, mode="keyword")
        assert result.targets[0].store == expected_store
        assert any("heron" in h.text for h in result.hits) is heron
        texts = _texts(svc, "heron kestrel", moved)
    with MemoryService(tmp_home) as fresh:
        assert fresh.recall("heron", cwd=moved, mode="keyword").targets[0].store == expected_store
        assert _texts(fresh, "heron kestrel", moved) == texts


_COUNT_PROBES = """
import sys
from pathlib import Path
from coffer_memory import MemoryService

home, cwd = Path(sys.argv[1]), Path(sys.argv[2])
probed = []
with MemoryService(home) as svc:
    for _ in range(2):
        svc.recall("heron", cwd=cwd, mode="keyword")
    sys.addaudithook(lambda event, args: probed.append(args[0]) if event in ("open", "os.listdir") else None)
    svc.recall("heron", cwd=cwd, mode="keyword")
print(sum(1 for p in probed if str(p).endswith(("store.json", "projects"))))
"""


def test_a_moved_checkout_among_stores_without_identity_lands_once_one_lists_it(
    tmp_home: Path, tmp_path: Path
) -> None:
    """Stores without a ``store.json`` (an index of older code, a copied home): no landing, kept;
    then another process writes one that lists the checkout, and the next recall lands there."""
    with MemoryService(tmp_home) as svc:
        repo = make_repo(tmp_path / "repo")
        store = svc.remember("the staging database is called heron", cwd=repo).store
        identity = svc.paths(store).root / STORE_FILE
        data = json.loads(identity.read_text())
        identity.unlink()
        moved = repo.rename(tmp_path / "moved")
        own = store_name_for_project(project_id_for(moved))
        assert svc.recall("heron", cwd=moved, mode="keyword").targets[0].store == own
        time.sleep(_PAST_RACY)
        assert _run(_COUNT_PROBES, str(tmp_home), str(moved)).strip() == "0"
        assert svc.recall("heron", cwd=moved, mode="keyword").targets[0].store == own  # kept from here
        assert svc.recall("heron", cwd=moved, mode="keyword").targets[0].store == own
        data["merged_identities"] = [project_id_for(moved)]
        _run(
            "import sys, pathlib; pathlib.Path(sys.argv[1]).write_text(sys.argv[2])",
            str(identity),
            json.dumps(data),
        )
        result = svc.recall("heron", cwd=moved, mode="keyword")
        assert result.targets[0].store == store and any("heron" in h.text for h in result.hits)
    with MemoryService(tmp_home) as fresh:
        assert fresh.recall("heron", cwd=moved, mode="keyword").targets[0].store == store


def test_a_checkout_without_a_store_is_named_by_the_folder_it_is_now(tmp_home: Path, tmp_path: Path) -> None:
    """The own store's name of a checkout without one is kept with the checkout's ``find_git``
    answer: a path whose link now leads to another repository gets that one's name."""
    a, b = make_repo(tmp_path / "a"), make_repo(tmp_path / "b")
    link = tmp_path / "here"
    link.symlink_to(a)
    time.sleep(_PAST_RACY)  # the checkouts' stat vouches for them from here
    with MemoryService(tmp_home) as svc:
        for _ in range(2):
            assert svc.recall("heron", cwd=link, mode="keyword").targets[0].store == store_name_for_project(
                project_id_for(a)
            )
        link.unlink()
        link.symlink_to(b)
        assert svc.recall("heron", cwd=link, mode="keyword").targets[0].store == store_name_for_project(
            project_id_for(b)
        )
        assert svc.target(cwd=link).store == store_name_for_project(project_id_for(b))


def test_a_projects_folder_that_is_a_link_is_watched_where_it_leads(tmp_home: Path, tmp_path: Path) -> None:
    """``memory/projects`` a link to a folder elsewhere (a synced one): a store made there by
    another process, listing the moved checkout, is landed in by the next recall."""
    with MemoryService(tmp_home) as svc:
        repo = make_repo(tmp_path / "repo")
        store = svc.remember("the staging database is called heron", cwd=repo).store
        (svc.paths(store).root / STORE_FILE).unlink()
    projects = tmp_home / "memory" / "projects"
    real = projects.rename(tmp_path / "projects_real")
    projects.symlink_to(real)
    moved = repo.rename(tmp_path / "moved")
    own = store_name_for_project(project_id_for(moved))
    time.sleep(_PAST_RACY)
    with MemoryService(tmp_home) as svc:
        for _ in range(2):  # the second answer is the kept one
            assert svc.recall("heron", cwd=moved, mode="keyword").targets[0].store == own
        folder = real / "00000000000000000000000000"
        identity = json.dumps({"merged_identities": [project_id_for(moved)], "project_root": str(repo)})
        _run(
            "import sys, pathlib; f = pathlib.Path(sys.argv[1]); f.mkdir(); (f / 'store.json').write_text(sys.argv[2])",
            str(folder),
            identity,
        )
        landed = store_name_for_project(folder.name)
        assert svc.recall("heron", cwd=moved, mode="keyword").targets[0].store == landed
    with MemoryService(tmp_home) as fresh:
        assert fresh.recall("heron", cwd=moved, mode="keyword").targets[0].store == landed

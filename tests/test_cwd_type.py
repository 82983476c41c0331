"""A ``cwd`` that is no path (a number, None's stand-ins from a JSON body) is ``InvalidInput``
naming the field, on every service call that takes one, not a raw ``TypeError``; a bytes path
is a path."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from coffer_memory import InvalidInput, MemoryService, Settings


@pytest.fixture
def service(tmp_path: Path) -> Iterator[MemoryService]:
    svc = MemoryService(settings=Settings.load(tmp_path / "home"))
    yield svc
    svc.close()


@pytest.mark.parametrize("bad", [5, 1.5, object(), ["a"]])
@pytest.mark.parametrize("call", ["recall", "remember", "rules"])
def test_a_cwd_that_is_no_path_is_invalid_input(service: MemoryService, bad: object, call: str) -> None:
    with pytest.raises(InvalidInput) as err:
        if call == "recall":
            service.recall("anything", cwd=bad)  # type: ignore[arg-type]
        elif call == "remember":
            service.remember("a fact", cwd=bad)  # type: ignore[arg-type]
        else:
            service.rules(cwd=bad)  # type: ignore[arg-type]
    assert err.value.field == "cwd"
    assert type(bad).__name__ in str(err.value)


def test_a_bytes_cwd_is_the_path_it_spells(service: MemoryService, tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    service.remember("the deploy key lives in the vault", cwd=repo)
    hits = service.recall("deploy key", cwd=bytes(repo), mode="keyword")  # type: ignore[arg-type]
    assert [h.text for h in hits.hits] == ["the deploy key lives in the vault"]

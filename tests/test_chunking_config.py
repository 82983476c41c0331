"""chunk_markdown and the configuration models."""

from __future__ import annotations

from pathlib import Path

import pytest

from coffer_memory import InvalidInput, MemoryStoreConfig, Settings, chunk_markdown
from coffer_memory._index.chunking import MEMORY_CHUNK_CHARS


def test_short_text_is_one_chunk() -> None:
    assert chunk_markdown("A short fact.\n\nWith two paragraphs.") == [
        "A short fact.\n\nWith two paragraphs."
    ]
    assert chunk_markdown("   \n") == []


def test_sections_never_share_a_chunk_and_keep_their_heading() -> None:
    doc = "# Ops\n\n" + "\n\n".join(f"## Part {i}\n\n" + ("word " * 150).strip() for i in range(4))
    chunks = chunk_markdown(doc)
    assert len(chunks) >= 4
    assert all(len(c) <= MEMORY_CHUNK_CHARS for c in chunks)
    for i in range(4):
        assert any(c.startswith(f"## Part {i}") for c in chunks)
    assert not any("## Part 1" in c and "## Part 2" in c for c in chunks)


def test_code_fences_stay_whole_and_long_blocks_are_cut_with_overlap() -> None:
    fence = "```sh\n" + "\n".join(f"echo {i}" for i in range(20)) + "\n```"
    doc = "# T\n\n" + ("alpha " * 300) + "\n\n" + fence + "\n\n" + ("omega " * 300)
    chunks = chunk_markdown(doc)
    assert any(fence in c for c in chunks)
    assert all(len(c) <= MEMORY_CHUNK_CHARS for c in chunks)
    joined = " ".join(chunks)
    assert joined.count("alpha") >= 300 and joined.count("omega") >= 300


def test_store_config_defaults_and_ranges() -> None:
    cfg = MemoryStoreConfig()
    assert cfg.retrieval_modes == ["grep", "keyword"] and cfg.default_mode == "keyword"
    assert cfg.embedding_dimensions == 768 and cfg.max_fact_chars == 8192 and cfg.merged_identities == []
    for bad in (
        {"embedding_dimensions": 0},
        {"embedding_dimensions": 8193},
        {"max_fact_chars": 63},
        {"max_fact_chars": 32769},
        {"retrieval_modes": []},
        {"retrieval_modes": ["semantic"]},
        {"default_mode": "vector"},
        {"unknown": 1},
    ):
        with pytest.raises(ValueError):
            MemoryStoreConfig.model_validate(bad)
    legacy = MemoryStoreConfig(
        embedding_provider="openai", embedding_model="m", embedding_credential_ref="ref"
    )
    assert legacy.embedding_model == "m"  # accepted, ignored by indexing and recall


def test_settings_from_home_and_config_toml(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COFFER_HOME", str(tmp_path / "envhome"))
    assert Settings.load().home == tmp_path / "envhome"
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text('grep_backend = "python"\n[memory]\nmax_fact_chars = 100\n')
    s = Settings.load(home)
    assert s.grep_backend == "python" and s.memory.max_fact_chars == 100
    assert s.index_path == home / "index.db" and s.memory_dir == home / "memory"
    (home / "config.toml").write_text("[memory]\nmax_fact_chars = 1\n")
    with pytest.raises(InvalidInput) as err:
        Settings.load(home)
    assert "max_fact_chars" in err.value.message
    (home / "config.toml").write_text("not = [toml")
    with pytest.raises(InvalidInput):
        Settings.load(home)

"""``Settings.load``'s layers: the defaults, ``config.toml``, ``COFFER_*`` variables, keyword
overrides, each beating the ones before it key by key (docs/configuration.md, "Settings").

A real home with a real ``config.toml``, real environment variables."""

from __future__ import annotations

from pathlib import Path

import pytest

from coffer_memory import EmbeddingSettings, Settings

CONFIG = """\
[embedding]
provider = "openai"
model = "file-model"
base_url = "http://file.invalid/v1"
batch_size = 16

[memory]
default_mode = "grep"
max_file_bytes = 123456
"""


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text(CONFIG)
    monkeypatch.setenv("COFFER_EMBEDDING_MODEL", "env-model")
    monkeypatch.setenv("COFFER_EMBEDDING_TIMEOUT_SECONDS", "5")
    return home


def test_a_keyword_section_overrides_only_the_keys_it_names(home: Path) -> None:
    """Before, ``embedding={...}`` replaced the whole section: the provider, model and batch size
    set in config.toml and the environment fell back to their defaults ("auto", None, 64)."""
    embedding = Settings.load(home, embedding={"base_url": "http://kw.invalid/v1"}).embedding
    assert embedding.base_url == "http://kw.invalid/v1"  # the keyword
    assert embedding.model == "env-model" and embedding.timeout_seconds == 5.0  # the environment
    assert embedding.provider == "openai" and embedding.batch_size == 16  # the file
    assert embedding.max_retries == EmbeddingSettings().max_retries  # the default


def test_a_keyword_beats_the_environment_and_the_file_for_the_same_key(home: Path) -> None:
    settings = Settings.load(
        home, embedding={"model": "kw-model", "provider": "ollama"}, memory={"max_file_bytes": 9999}
    )
    assert (settings.embedding.model, settings.embedding.provider) == ("kw-model", "ollama")
    assert settings.embedding.batch_size == 16 and settings.embedding.timeout_seconds == 5.0
    assert settings.memory.max_file_bytes == 9999 and settings.memory.default_mode == "grep"


def test_a_section_given_as_a_settings_object_is_the_whole_section(home: Path) -> None:
    whole = EmbeddingSettings(provider="hash-cpu")
    assert Settings.load(home, embedding=whole).embedding == whole


def test_a_bad_keyword_value_is_refused_with_where_the_rest_came_from(home: Path) -> None:
    from coffer_memory import InvalidInput

    with pytest.raises(InvalidInput) as caught:
        Settings.load(home, embedding={"batch_size": 0})
    assert "embedding.batch_size" in caught.value.message and "config.toml" in caught.value.message

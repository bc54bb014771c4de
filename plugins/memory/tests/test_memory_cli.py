"""``lamina memory import`` / ``stats`` against a config file and a SQLite store on disk."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner
from lamina_memory.cli import memory_group


def test_import_then_stats(tmp_path: Path) -> None:
    config = tmp_path / "lamina.toml"
    config.write_text('model = "gpt-4o"\n[plugins.memory]\nstore = "sqlite:///m.db"\n')
    good = tmp_path / "good.jsonl"
    good.write_text(
        json.dumps({"kind": "chunk", "id": "a", "text": "alpha"})
        + "\n"
        + json.dumps({"kind": "entity", "id": "n", "type": "person", "name": "Ann"})
        + "\n"
    )
    runner = CliRunner()
    out = runner.invoke(memory_group, ["import", "-c", str(config), str(good)])
    assert out.exit_code == 0, out.output
    assert out.output == f"{good}: imported 2 memories\n"
    stats = runner.invoke(memory_group, ["stats", "-c", str(config)])
    assert stats.exit_code == 0
    assert stats.output.splitlines()[1:] == [
        "  events: 0",
        "  chunks: 1",
        "  entities: 1",
        "  relations: 0",
        "  patterns: 0",
    ]
    bad = tmp_path / "bad.json"
    bad.write_text('[{"kind": "chunk", "id": "b"}]')
    failed = runner.invoke(memory_group, ["import", "-c", str(config), str(bad)])
    assert failed.exit_code == 2
    assert "bad.json record 0" in failed.output and "text" in failed.output
    assert (tmp_path / "m.db").is_file()


def test_without_a_section_it_says_so(tmp_path: Path) -> None:
    config = tmp_path / "lamina.toml"
    config.write_text('model = "gpt-4o"\n')
    out = CliRunner().invoke(memory_group, ["stats", "-c", str(config)])
    assert out.exit_code == 1
    assert "no [plugins.memory] section" in out.output

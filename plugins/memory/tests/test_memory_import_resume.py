"""``lamina memory import`` at scale: progress on a terminal only, and an import killed part way
resumes on the next run without writing or embedding anything twice."""

from __future__ import annotations

import hashlib
import json
import os
import re
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import lamina_memory.cli as cli
import pytest
from click.testing import CliRunner
from lamina_memory.cli import memory_group
from lamina_memory.embedders import register_embedder
from lamina_memory.importing import IMPORT_BATCH
from lamina_memory.store import open_store

TOTAL = 2 * IMPORT_BATCH + 100

#: Runs ``lamina memory import`` with a counting embedder that kills its own process (SIGKILL:
#: no clean-up runs) once it has embedded ``KILL_AFTER`` texts.
SCRIPT = textwrap.dedent(
    """
    import os, signal, sys
    import numpy as np
    from lamina_memory.embedders import register_embedder
    from lamina_memory.cli import memory_group

    class Counting:
        name, dim, seen = "counting", 3, 0

        def embed(self, texts):
            kill = int(os.environ.get("KILL_AFTER", "0"))
            if kill and Counting.seen >= kill:
                os.kill(os.getpid(), signal.SIGKILL)
            Counting.seen += len(texts)
            with open(os.environ["COUNT_FILE"], "a") as f:
                f.write(f"{len(texts)}\\n")
            return np.tile(np.float32([0.6, 0.8, 0.0]), (len(texts), 1))

    register_embedder("counting", lambda options: Counting())
    memory_group.main(sys.argv[1:], prog_name="lamina memory")
    """
)


def _setup(tmp_path: Path) -> tuple[Path, Path]:
    config = tmp_path / "lamina.toml"
    config.write_text(
        'model = "gpt-4o"\n[plugins.memory]\nstore = "sqlite:///m.db"\nembedder = "counting"\n'
    )
    data = tmp_path / "memories.jsonl"
    data.write_text(
        "".join(
            json.dumps({"kind": "chunk", "id": f"c{i}", "text": f"memory number {i}"}) + "\n"
            for i in range(TOTAL)
        )
    )
    return config, data


def _run(tmp_path: Path, config: Path, data: Path, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", SCRIPT, "import", "-c", str(config), str(data)],
        capture_output=True,
        text=True,
        env={**os.environ, "COUNT_FILE": str(tmp_path / "embedded.txt"), **env},
        timeout=300,
        check=False,
    )


def _embedded(tmp_path: Path) -> int:
    counts = tmp_path / "embedded.txt"
    return sum(int(x) for x in counts.read_text().split()) if counts.exists() else 0


def test_a_killed_import_resumes_without_duplicates(tmp_path: Path) -> None:
    config, data = _setup(tmp_path)
    killed = _run(tmp_path, config, data, KILL_AFTER=str(2 * IMPORT_BATCH))
    assert killed.returncode == -signal.SIGKILL
    store = open_store("sqlite:///m.db", root=tmp_path)
    assert len(store.chunks()) == 2 * IMPORT_BATCH  # two whole batches, nothing of the third
    store.close()
    (tmp_path / "embedded.txt").unlink()

    resumed = _run(tmp_path, config, data)
    assert resumed.returncode == 0, resumed.stderr
    assert resumed.stdout == f"{data}: imported 100 memories (resumed after {2 * IMPORT_BATCH})\n"
    assert _embedded(tmp_path) == 100  # what was written before is not embedded again
    assert resumed.stderr == ""  # not a terminal: no progress

    store = open_store("sqlite:///m.db", root=tmp_path)
    chunks = store.chunks()
    assert [c.id for c in chunks] == [f"c{i}" for i in range(TOTAL)]  # all, once, in order
    assert all(c.embedding is not None for c in chunks)
    assert store.mark("import:" + hashlib.sha256(data.read_bytes()).hexdigest()) is None
    store.close()

    again = _run(tmp_path, config, data)  # a finished import, run again: rewritten in place
    assert again.stdout == f"{data}: imported {TOTAL} memories\n"
    store = open_store("sqlite:///m.db", root=tmp_path)
    assert len(store.chunks()) == TOTAL
    store.close()


class _Unit:
    name, dim = "unit", 3

    def embed(self, texts: Any) -> Any:
        import numpy as np

        return np.tile(np.float32([0.6, 0.8, 0.0]), (len(texts), 1))


register_embedder("unit", lambda options: _Unit())


def _import(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tty: bool) -> Any:
    config = tmp_path / "lamina.toml"
    config.write_text(
        'model = "gpt-4o"\n[plugins.memory]\nstore = "sqlite:///m.db"\nembedder = "unit"\n'
    )
    data = tmp_path / "m.jsonl"
    data.write_text(
        "".join(
            json.dumps({"kind": "chunk", "id": f"c{i}", "text": f"note {i}"}) + "\n"
            for i in range(IMPORT_BATCH + 1)
        )
    )
    monkeypatch.setattr(cli, "interactive", lambda: tty)
    return CliRunner().invoke(memory_group, ["import", "-c", str(config), str(data)])


def test_progress_shows_on_a_terminal(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    out = _import(tmp_path, monkeypatch, tty=True)
    assert out.exit_code == 0
    name = tmp_path / "m.jsonl"
    assert f"\rlamina: {name}: 256 of 257 memories, " in out.stderr  # the first batch
    last = out.stderr.rsplit("\r", 1)[1]
    assert re.fullmatch(
        rf"lamina: {re.escape(str(name))}: 257 of 257 memories, "
        r"[\d,]+\.\d embeddings/s\n",
        last,
    ), last


def test_no_progress_when_not_a_terminal(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    out = _import(tmp_path, monkeypatch, tty=False)
    assert out.exit_code == 0 and out.stderr == ""
    assert out.stdout == f"{tmp_path / 'm.jsonl'}: imported 257 memories\n"

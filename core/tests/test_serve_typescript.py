"""The TypeScript client's own tests (``node --test``): a real ``lamina serve`` with the
ledger on SQLite and a ten-turn agent loop through the client, and its generated types in
step with the schema. Run on a copy of contrib/typescript-client/ so nothing is written into
the source tree; npm installs the pinned dev dependencies (``npm ci``)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CLIENT = ROOT / "contrib" / "typescript-client"
SCHEMA = ROOT / "docs" / "schema" / "lamina.schema.json"

pytest.importorskip("lamina_ledger")


def run(args: list[str], cwd: Path, env: dict[str, str], timeout: int) -> None:
    done = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, f"{' '.join(args)} failed:\n{done.stdout}\n{done.stderr}"


def test_the_typescript_client_passes_its_node_tests(tmp_path):
    npm = shutil.which("npm")
    if npm is None or shutil.which("node") is None:
        pytest.skip("npm and node are not installed: the TypeScript client's tests need Node 20")
    copy = tmp_path / "typescript-client"
    shutil.copytree(CLIENT, copy, ignore=shutil.ignore_patterns("node_modules", "dist"))
    env = {
        **os.environ,
        "LAMINA_PYTHON": sys.executable,
        "LAMINA_SCHEMA": str(SCHEMA),
        "npm_config_update_notifier": "false",
    }
    env.pop("LAMINA_SERVE_TOKEN", None)
    run([npm, "ci", "--prefer-offline", "--no-audit", "--no-fund"], copy, env, timeout=180)
    run([npm, "test"], copy, env, timeout=180)

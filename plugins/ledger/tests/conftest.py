"""Fixtures: one throw-away PostgreSQL server per test session (loopback, temp dir), and a
``target`` fixture that runs a test against an SQLite file and a fresh PostgreSQL schema."""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from ledger_helpers import fresh_schema

HINT = "PostgreSQL's initdb/pg_ctl were not found: run scripts/ensure-postgres.sh (as root)"


def _bindir() -> Path | None:
    for d in sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=_version, reverse=True):
        if os.access(f"{d}/initdb", os.X_OK) and os.access(f"{d}/pg_ctl", os.X_OK):
            return Path(d)
    found = shutil.which("initdb")
    if found and shutil.which("pg_ctl"):
        return Path(os.path.realpath(found)).parent
    return None


def _version(path: str) -> tuple[int, ...]:
    part = path.split("/")[-2]
    return tuple(int(x) for x in part.split(".") if x.isdigit())


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    """URL of a PostgreSQL server started for this test session and stopped after it."""
    bindir = _bindir()
    if bindir is None:
        pytest.fail(HINT, pytrace=False)
    base = Path(tempfile.mkdtemp(prefix="lamina-ledger-pg-"))
    data, log = base / "data", base / "server.log"
    as_user: list[str] = []
    if os.geteuid() == 0:  # initdb refuses root: run the server as the postgres user
        try:
            import pwd

            pwd.getpwnam("postgres")
        except KeyError:
            subprocess.run(["useradd", "--system", "--no-create-home", "postgres"], check=True)
        shutil.chown(base, "postgres")
        as_user = ["runuser", "-u", "postgres", "--"]
    port = _free_port()

    def run(*args: str) -> None:
        done = subprocess.run([*as_user, *args], capture_output=True, text=True)
        if done.returncode != 0:
            pytest.fail(
                f"{' '.join(args[:2])} failed: {done.stdout}{done.stderr}"
                f"{log.read_text() if log.exists() else ''}",
                pytrace=False,
            )

    run(str(bindir / "initdb"), "-D", str(data), "-U", "lamina", "--auth=trust", "-E", "UTF8")
    opts = f"-k {base} -p {port} -c listen_addresses=127.0.0.1 -c fsync=off"
    run(str(bindir / "pg_ctl"), "-D", str(data), "-o", opts, "-l", str(log), "-w", "start")
    try:
        yield f"postgresql://lamina@127.0.0.1:{port}/postgres"
    finally:
        subprocess.run(
            [*as_user, str(bindir / "pg_ctl"), "-D", str(data), "-m", "immediate", "-w", "stop"],
            capture_output=True,
        )
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture(params=["sqlite", "postgres"])
def target(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A ledger location: an SQLite file, or an empty schema on the test PostgreSQL server."""
    if request.param == "sqlite":
        return str(tmp_path / "ledger.db")
    return fresh_schema(request.getfixturevalue("postgres_url"))

"""The process's pool of read-only ledgers closes what it opened when the interpreter exits,
so a host's PostgreSQL connections are closed, not left to the garbage collector."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable

from lamina_ledger.ledger import Ledger

from lamina import Message

CHILD = """
import sys
from lamina_ledger.pool import POOL
POOL.get(sys.argv[1], busy_timeout=1.0, connect_timeout=10.0).history("s")
print("read")
"""


def test_pool_closes_its_readers_at_exit(
    target: str, exchange: Callable[..., list[Message]]
) -> None:
    with Ledger.open(target) as ledger:
        ledger.append_turn("s", exchange(1))
    done = subprocess.run(
        [sys.executable, "-W", "always::ResourceWarning", "-c", CHILD, target],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "read"
    assert "ResourceWarning" not in done.stderr, done.stderr

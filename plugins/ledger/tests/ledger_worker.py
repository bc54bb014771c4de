"""A ledger writer in its own process, for the concurrency and crash tests (run as a script).

    ledger_worker.py append TARGET SESSION NAME COUNT   append COUNT turns, print each id
    ledger_worker.py create TARGET SESSION              create SESSION, append one turn
    ledger_worker.py compact TARGET SESSION COUNT       compact COUNT times (tiny budget)
    ledger_worker.py stall-import TARGET SESSION FILE   import FILE; stall inside the transaction
    ledger_worker.py stall-compact TARGET SESSION       compact; stall inside the transaction

Every acknowledged write is printed (flushed) as soon as it returns. The ``stall-`` commands
print ``stalled`` once the transaction has written rows but not committed, then wait to be
killed, so a test can SIGKILL the writer at exactly that point.
"""

from __future__ import annotations

import sys
import threading
from typing import Any

from lamina_ledger.compaction import compact_history
from lamina_ledger.db import Database
from lamina_ledger.importer import import_jsonl
from lamina_ledger.ledger import Ledger
from lamina_ledger.settings import LedgerSettings
from lamina_ledger.summarizer import summarizer

from lamina import Message
from lamina.testing import FakeTokenizer


def say(text: str) -> None:
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


def compact(ledger: Ledger, session: str) -> str | None:
    result = compact_history(
        ledger,
        ledger.history(session),
        history_budget=60,
        settings=LedgerSettings(minimum_turns=1),
        summarizer=summarizer(),
        tokenizer=FakeTokenizer(),
    )
    return None if result is None else result.turn_id


def stall_after(statement: str, times: int = 1) -> None:
    """From the ``times``-th statement starting with ``statement`` on, stall after running it."""
    real = Database.execute
    seen = [0]

    def execute(self: Database, text: str, params: Any = ()) -> Any:
        out = real(self, text, params)
        if text.lstrip().startswith(statement):
            seen[0] += 1
            if seen[0] == times:
                say("stalled")
                threading.Event().wait()  # until killed
        return out

    Database.execute = execute  # type: ignore[method-assign]


def main(command: str, target: str, session: str, *rest: str) -> None:
    with Ledger.open(target, busy_timeout=60) as ledger:
        if command == "append":
            name, count = rest[0], int(rest[1])
            for i in range(count):
                say(ledger.append_turn(session, [Message.of("user", f"{name} turn {i}")]))
        elif command == "create":
            ledger.create_session(session)
            say(ledger.append_turn(session, [Message.of("user", "created")]))
        elif command == "compact":
            for _ in range(int(rest[0])):
                done = compact(ledger, session)
                say(done or "nothing")
        elif command == "stall-import":
            stall_after("INSERT INTO messages", times=3)
            import_jsonl(ledger, rest[0], session)
        elif command == "stall-compact":
            stall_after("INSERT INTO compactions")
            compact(ledger, session)
        else:
            raise SystemExit(f"unknown command {command!r}")


if __name__ == "__main__":
    main(*sys.argv[1:])

"""The one error the ledger raises: it names the session, the turn and the cause."""

from __future__ import annotations

from lamina import LaminaError


class LedgerError(LaminaError):
    """A ledger that cannot be read or written as asked; nothing was written."""

    exit_code = 1

    def __init__(
        self,
        cause: str,
        *,
        session: str | None = None,
        turn: str | None = None,
        database: str | None = None,
    ) -> None:
        self.cause, self.session, self.turn, self.database = cause, session, turn, database
        where = [
            x
            for x in (
                f"ledger {database}" if database else None,
                f"session {session!r}" if session is not None else None,
                f"turn {turn!r}" if turn is not None else None,
            )
            if x
        ]
        super().__init__(f"{', '.join(where)}: {cause}" if where else cause)

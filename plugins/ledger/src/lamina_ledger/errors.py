"""The ledger's errors: each names the database, the session, the turn and the cause."""

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

    def located(
        self, *, session: str | None, turn: str | None, database: str | None
    ) -> LedgerError:
        """The same error (same class) naming the session, turn and database it lacked."""
        new = type(self).__new__(type(self))
        new.__dict__.update(self.__dict__)
        LedgerError.__init__(
            new,
            self.cause,
            session=self.session if self.session is not None else session,
            turn=self.turn if self.turn is not None else turn,
            database=self.database if self.database is not None else database,
        )
        return new


class LedgerConflict(LedgerError):
    """A write that raced another writer of the session and lost; nothing was written and the
    caller may read the session again and retry."""


class TranscriptError(LedgerError):
    """A transcript that cannot be imported: names the file, the line and the field; nothing
    was written. Bad input, so the CLI exits with status 2."""

    exit_code = 2

    def __init__(
        self,
        cause: str,
        *,
        session: str,
        file: str,
        line: int | None = None,
        field: str | None = None,
    ) -> None:
        self.file, self.line, self.field = file, line, field
        where = file if line is None else f"{file}:{line}"
        if field and not cause.startswith(field):
            cause = f"{field}: {cause}"
        super().__init__(f"{where}: {cause}", session=session)

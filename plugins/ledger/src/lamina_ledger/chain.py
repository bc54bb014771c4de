"""Each turn's prefix blocks as the ledger stores them: the blocks after the first
``prefix_base`` of the parent turn's (the whole list when ``prefix_base`` is 0: the session's
first turn with a prefix, the first after a compaction or after a turn without one), so a
session whose prefix only grows stores each block once. A writer remembers the lists it wrote
last; another process reads a turn's whole list back once, walking to the last whole one."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from attrs import frozen

from lamina_ledger.db import Database
from lamina_ledger.prefix import Bust, Entry, Prefix, compare, dump, load
from lamina_ledger.recent import Recent

#: Whole lists a writer remembers (by turn id): each session's latest, usually.
MEMO = 256
#: How far back a list is followed before the ledger is taken to be looping.
WALK = 10_000_000


@frozen(kw_only=True)
class PrefixRow:
    """The prefix columns of a turn being written."""

    sha256: str | None = None
    tokens: int | None = None
    base: int | None = None
    blocks: str | None = None
    bust: Bust | None = None

    def columns(self) -> dict[str, Any]:
        return {
            "prefix_sha256": self.sha256,
            "prefix_tokens": self.tokens,
            "prefix_base": self.base,
            "prefix_blocks": self.blocks,
            "prefix_change": None if self.bust is None else self.bust.change,
            "prefix_block": None if self.bust is None else self.bust.block,
        }


class PrefixChain:
    """Whole prefix lists of recent turns, and the row a new turn's prefix is stored as."""

    def __init__(self) -> None:
        self._memo: Recent[str, Sequence[Entry]] = Recent(MEMO)

    def row(
        self, db: Database, turn_id: str, parent: str | None, prefix: Prefix | None
    ) -> PrefixRow:
        """Inside the write that appends ``turn_id`` under ``parent``: its prefix columns,
        with the bust when the parent's prefix is known and this one does not extend it."""
        if prefix is None:
            return PrefixRow()
        before = None if parent is None else self.whole(db, parent)
        base, bust = compare(before, prefix.blocks) if before is not None else (0, None)
        self._memo[turn_id] = prefix.blocks
        return PrefixRow(
            sha256=prefix.sha256,
            tokens=prefix.tokens,
            base=base,
            blocks=dump(prefix.blocks[base:]),
            bust=bust,
        )

    def whole(self, db: Database, turn_id: str) -> Sequence[Entry] | None:
        """``turn_id``'s whole prefix list, or ``None`` (a compaction turn, or a turn recorded
        without its prefix)."""
        found = self._memo.get(turn_id)
        if found is not None:
            return found
        rows = db.rows(
            "WITH RECURSIVE walk(id, parent_id, type, base, blocks, n) AS ("
            " SELECT id, parent_id, type, prefix_base, prefix_blocks, 0 FROM turns WHERE id = ?"
            " UNION ALL"
            " SELECT t.id, t.parent_id, t.type, t.prefix_base, t.prefix_blocks, walk.n + 1"
            " FROM walk JOIN turns t ON t.id = walk.parent_id"
            " WHERE walk.base > 0 AND walk.n < ?"
            ") SELECT type, base, blocks FROM walk ORDER BY n",
            (turn_id, WALK),
        )
        if not rows or any(r[0] != "normal" or r[1] is None or r[2] is None for r in rows):
            return None
        if int(rows[-1][1]) != 0:  # the walk ended before a whole list: not to be trusted
            return None
        blocks = load(rows[-1][2])
        for _type, base, more in reversed(rows[:-1]):
            del blocks[int(base) :]  # in place: a growing prefix is rebuilt in linear time
            blocks.extend(load(more))
        whole = tuple(blocks)
        self._memo[turn_id] = whole
        return whole

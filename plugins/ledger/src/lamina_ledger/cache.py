"""What a reader keeps between requests: each session's last history (its decoded turns) and
the blocks made from them, so the next request reads and decodes only what was appended.

Turns are never edited once written, so a decoded turn stays valid for as long as it is on a
history; what changes is which turns a history holds. The store's session version (and the
head) say whether it changed; a history read at a chosen turn never changes."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Sequence

from attrs import define, field

from lamina import Block, Chunked, ToolCallPart
from lamina_ledger.records import History, Turn
from lamina_ledger.rows import unanswered

#: Sessions (and pinned turns) a reader remembers; the least recently used is forgotten first.
SESSIONS = 256

Key = tuple[str, str | None]

_NONE: Chunked[Block] = Chunked()


@define(kw_only=True)
class Entry:
    """One session's history as last read, with the version and head it was read at and the
    blocks made from it (by plugin name and turn id; ``""`` holds the summary)."""

    version: int | None
    head: str | None
    history: History
    blocks: dict[tuple[str, str], tuple[Block, ...]] = field(factory=dict)
    #: The whole block sequence by (plugin, summary key), with how many turns it covers.
    flat: dict[tuple[str, str], tuple[int, Chunked[Block]]] = field(factory=dict)
    #: Each plugin's maker of a turn's blocks, as last used on this history: a turn written
    #: through this ledger has its blocks made then (``appended``), not at the next read.
    makers: dict[str, Callable[[Turn], Sequence[Block]]] = field(factory=dict)
    #: The database's commit mark (``lamina_ledger.watch``) taken before the version and head
    #: were last found to be this entry's: while it holds, they still are.
    mark: bytes | None = None
    _calls: frozenset[str] | None = None

    def calls(self) -> frozenset[str]:
        """The ids of every tool call in the history (found once)."""
        if self._calls is None:
            self._calls = frozenset(
                p.id
                for t in self.history.turns
                for m in t.messages
                for p in m.content
                if isinstance(p, ToolCallPart)
            )
        return self._calls

    def turns(self) -> dict[str, Turn]:
        return {t.id: t for t in self.history.turns}

    def hand_over(self, entry: Entry) -> None:
        """Give ``entry`` (this history with turns appended) the blocks made so far."""
        entry.blocks, entry.flat, entry.makers = self.blocks, self.flat, self.makers
        self.blocks, self.flat, self.makers = {}, {}, {}

    def carried(self, history: History) -> dict[tuple[str, str], tuple[Block, ...]]:
        """The blocks still good for ``history``: those of turns it still holds."""
        ids = {t.id for t in history.turns}
        if history.compaction is not None:
            ids.add(history.compaction.turn_id)
        return {k: v for k, v in self.blocks.items() if k[1].split("\x00")[0] in ids}


class HistoryCache:
    """Entries by (session, pinned turn or ``None`` for the head), least recently used first.
    Callers hold the reader's lock."""

    def __init__(self, size: int = SESSIONS) -> None:
        self.size = size
        self._entries: OrderedDict[Key, Entry] = OrderedDict()

    def get(self, key: Key) -> Entry | None:
        found = self._entries.get(key)
        if found is not None:
            self._entries.move_to_end(key)
        return found

    def put(self, key: Key, entry: Entry) -> None:
        self._entries[key] = entry
        self._entries.move_to_end(key)
        while len(self._entries) > self.size:
            self._entries.popitem(last=False)

    def known(self, session: str) -> dict[str, Turn]:
        """The decoded turns of ``session`` 's remembered histories, by id."""
        out: dict[str, Turn] = {}
        for (name, _at), entry in self._entries.items():
            if name == session:
                out.update(entry.turns())
        return out

    def clear(self) -> None:
        self._entries.clear()


def appended(cache: HistoryCache, session: str, parent: str, version: int, turn: Turn) -> bool:
    """Put ``turn``, just appended on ``parent`` by this ledger (the session's version now
    ``version``), on the session's remembered history when that is the history it went on
    (its head ``parent``, one version before): the next request then reads only the version,
    as if it had read the turn, and finds its blocks made by the makers that made the
    history's blocks before (``Entry.makers``). Otherwise (another writer came between, a
    tool result whose call is further back) nothing changes and the next request reads.
    Returns whether it went on. Callers hold the reader's lock."""
    key = (session, None)
    old = cache.get(key)
    if old is None or old.version is None or old.version != version - 1 or old.head != parent:
        return False
    missing = unanswered(turn.messages)
    if missing and not missing.keys() <= old.calls():
        return False
    history = History(
        session=session,
        head_turn_id=turn.id,
        compaction=old.history.compaction,
        turns=Chunked.of(old.history.turns).grown([turn]),  # (no copy of the turns before)
    )
    entry = Entry(version=version, head=turn.id, history=history)
    old.hand_over(entry)
    for plugin, make in entry.makers.items():
        try:
            entry.blocks[(plugin, turn.id)] = tuple(make(turn))
        except Exception:  # (made at the next read instead, where an error is reported)
            continue
    cache.put(key, entry)
    return True


def cached_blocks(
    entry: Entry,
    plugin: str,
    summary: tuple[str, Callable[[], Block | None]],
    make: Callable[[Turn], Sequence[Block]],
) -> Chunked[Block]:
    """The history's blocks, each turn's made once per plugin and kept on ``entry``;
    ``summary`` is the summary block's maker and what it depends on besides the compaction.
    The whole sequence is kept too, immutable (a ``Chunked``): a history that grew gets one
    that shares its chunks, so neither this nor the kernel copies the blocks before it."""
    turns = entry.history.turns
    entry.makers[plugin] = make
    covered, whole = entry.flat.get((plugin, summary[0]), (0, _NONE))
    out: list[Block] = []
    if not covered:
        whole = _NONE
        compaction = entry.history.compaction
        if compaction is not None:
            key = (plugin, f"{compaction.turn_id}\x00{summary[0]}")
            found = entry.blocks.get(key)
            if found is None:
                made = summary[1]()
                found = entry.blocks[key] = (made,) if made is not None else ()
            out += found
    for turn in turns[covered:]:
        key = (plugin, turn.id)
        found = entry.blocks.get(key)
        if found is None:
            found = entry.blocks[key] = tuple(make(turn))
        out += found
    whole = whole.grown(out)
    entry.flat[(plugin, summary[0])] = (len(turns), whole)
    return whole

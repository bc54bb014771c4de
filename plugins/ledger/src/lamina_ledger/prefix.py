"""The stable prefix of an assembled request as the ledger records it with the turn: its hash
and size, and its blocks in request order (each block's id, the start of its content hash and
its tokens: a block cut differently counts other tokens). A turn's entries share the previous
turn's chunks (``lamina.Chunked``), so recording a turn of a long session costs what the turn
added, not the whole history's entries.

A provider's prompt cache serves a request from the longest prefix it has seen, so the next
turn's prefix should start with this one's. When it does not, and no compaction came between,
the turn is a cache bust and the first block that differs is named."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from typing import Literal

from attrs import frozen

from lamina import (
    AssembledContext,
    AssemblyReport,
    AssemblyRequest,
    BlockReport,
    Chunked,
    Event,
    Message,
    Tool,
    tools_digest,
)
from lamina_ledger.recent import SESSIONS, Recent

#: The placements a stable prefix covers, in request order.
PLACEMENTS = ("system", "before_history", "history")
#: The entry standing for the tool definitions (sent ahead of the system prompt).
TOOLS = "(tools)"
#: Hex digits kept of each block's content hash: enough to tell one block's versions apart.
SHORT = 16

#: A block of a prefix: its id, the start of its content hash, its tokens.
Entry = tuple[str, str, int]
Change = Literal["changed", "added", "removed", "moved"]


@frozen(kw_only=True)
class Prefix:
    """A request's stable prefix: the report's hash and tokens, and its blocks in order."""

    sha256: str
    tokens: int
    blocks: Sequence[Entry]


@frozen(kw_only=True)
class Bust:
    """How a prefix failed to extend the previous turn's: the first block that differs."""

    block: str
    change: Change


def _short(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:SHORT]


#: A run of a report's blocks made into entries, by placement (the prefix's only).
Grouped = dict[str, tuple[Entry, ...]]


class EntryMemo:
    """Each chunk of report blocks made into entries once: a long history's report shares
    its chunks with the session's next report (``lamina.Chunked``), so a turn makes the
    entries of its new blocks only, and the entries it shares are the same objects (the
    comparison with the previous turn's prefix then finds them equal by identity)."""

    def __init__(self, size: int = 4 * SESSIONS) -> None:
        self._runs: Recent[int, tuple[tuple[BlockReport, ...], Grouped]] = Recent(size)

    def grouped(self, run: tuple[BlockReport, ...]) -> Grouped:
        found = self._runs.get(id(run))
        if found is not None and found[0] is run:  # (it holds ``run``: the id is still its)
            return found[1]
        made = _grouped(run)
        self._runs[id(run)] = (run, made)
        return made


def _grouped(run: Sequence[BlockReport]) -> Grouped:
    """The entries of ``run``'s kept blocks in the prefix's placements, by placement."""
    groups: dict[str, list[Entry]] = {p: [] for p in PLACEMENTS}
    for b in run:
        group = groups.get(b.placement)
        if group is not None and b.status != "dropped":
            group.append((b.id, b.hash[:SHORT], b.tokens))
    return {p: tuple(g) for p, g in groups.items() if g}


def prefix_from(
    report: AssemblyReport, tools: Sequence[Tool], memo: EntryMemo | None = None
) -> Prefix | None:
    """The stable prefix of an assembly's report and the tools sent with it; ``memo`` keeps
    the entries of the report's chunks for the next report that shares them."""
    stable = report.stable_prefix
    if stable is None:
        return None
    blocks = report.blocks
    if memo is not None and isinstance(blocks, Chunked):
        runs = [memo.grouped(chunk) for chunk in blocks.chunks]
    else:
        runs = [_grouped(blocks)]
    parts: list[tuple[Entry, ...]] = []
    if tools:  # the kernel's digest of them (a report made by hand may lack it)
        digest = stable.tools_sha256 or tools_digest(tools)
        assert digest is not None
        parts.append(((TOOLS, digest[:SHORT], 0),))
    for placement in PLACEMENTS:  # grouped in request order
        parts += (run[placement] for run in runs if placement in run)
    # The runs' tuples are the chunks: a memo's runs are the previous turn's, not copied.
    entries: Chunked[Entry] = Chunked.joined(parts)
    return Prefix(sha256=stable.sha256, tokens=stable.tokens, blocks=entries)


def compare(old: Sequence[Entry], new: Sequence[Entry]) -> tuple[int, Bust | None]:
    """How many of ``old``'s blocks ``new`` starts with, and the bust when that is not all:
    a block ``added`` before the rest, ``removed``, ``changed`` (same id, other content) or
    ``moved``."""
    n = min(len(old), len(new))
    shared = _same_chunks(old, new)
    if len(new) >= len(old) and tuple(old[shared:]) == tuple(new[shared:n]):  # (at C speed)
        return n, None
    while shared < n and old[shared] == new[shared]:
        shared += 1
    if shared == len(old):
        return shared, None
    if shared == len(new):
        return shared, Bust(block=old[shared][0], change="removed")
    was, now = old[shared][0], new[shared][0]
    if was == now:
        return shared, Bust(block=now, change="changed")
    if now not in {e[0] for e in old}:
        return shared, Bust(block=now, change="added")
    if was not in {e[0] for e in new}:
        return shared, Bust(block=was, change="removed")
    return shared, Bust(block=now, change="moved")


def _same_chunks(old: Sequence[Entry], new: Sequence[Entry]) -> int:
    """How many entries lead both in equal chunks: a prefix made from a report that grew
    from the last one holds that one's chunks (compared by identity, at once), but for the
    last few, merged into a new one."""
    if not isinstance(old, Chunked) or not isinstance(new, Chunked):
        return 0
    same = 0
    for mine, theirs in zip(old.chunks, new.chunks, strict=False):
        if mine is not theirs and mine != theirs:
            break
        same += len(mine)
    return same


def dump(entries: Sequence[Entry]) -> str:
    return json.dumps([list(e) for e in entries], ensure_ascii=False, separators=(",", ":"))


def load(text: str) -> list[Entry]:
    return [(str(e[0]), str(e[1]), int(e[2])) for e in json.loads(text)]


@frozen(kw_only=True)
class _Sent:
    """What an assembly sent, kept until its turn is recorded."""

    report: AssemblyReport
    tools: tuple[Tool, ...]
    current: Message
    event: Event | None


class Prefixes:
    """What each session's last assembly sent, until its turn is recorded: the report and the
    tools, made into a ``Prefix`` only then (an assembly whose turn is never recorded costs
    nothing). Bounded: the least recently assembled session is forgotten first."""

    def __init__(self, size: int = SESSIONS) -> None:
        self._by_session: Recent[str, _Sent] = Recent(size)
        self._entries = EntryMemo(4 * size)

    def keep(self, ctx: AssembledContext, event: Event | None = None) -> AssembledContext:
        """Remember what ``ctx`` sent (assembled for ``event``) as its session's next turn's;
        returns ``ctx``."""
        sent = _Sent(report=ctx.report, tools=ctx.tools, current=ctx.current_message, event=event)
        self._by_session[ctx.session_label] = sent
        return ctx

    def take(
        self, request: AssemblyRequest | AssembledContext, messages: Sequence[Message] = ()
    ) -> Prefix | None:
        """The prefix of the turn being recorded: the assembled context's own when given one,
        else what this session's last assembly sent, provided the turn is that assembly's
        (its request has the same event, or its messages hold the current message as sent);
        a turn another process assembled gets none. Taken once: a prefix is one request's."""
        if isinstance(request, AssembledContext):
            return prefix_from(request.report, request.tools, self._entries)
        sent = self._by_session.pop(request.session_label)
        if sent is None:
            return None
        if (sent.event is not None and request.event == sent.event) or sent.current in messages:
            return prefix_from(sent.report, sent.tools, self._entries)
        return None

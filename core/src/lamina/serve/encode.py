"""The assembled context as JSON, the history's, the tools' and the report's blocks written once.

A warm assembly hands back the same ``Message`` objects for the history it did not touch, and
the same ``BlockReport`` objects for their blocks (see ``lamina.assembly.format`` and
``report``): on a long session they are nearly all of the reply. A host that offers the same
tools gets the same ``Tool`` objects back (``lamina.serve.tools_memo``). ``ContextEncoder``
keeps, per stream (session label and model, as the kernel keeps its layouts), the last reply
with the objects its three arrays held and where each one's JSON lies in it. The next reply takes
each run of the very same objects (identity: they are held, so no other object can share
their ``id``) as one slice of the last reply, writes only the others, and joins it all at
once with the rest of the context, written as before.

The bytes are those of ``dumps(unstructure(ctx))`` (tests hold them equal): the objects are
frozen, so their JSON cannot change while they are held. A stream keeps only its last reply;
the least recently used streams go first past ``STREAMS`` streams or ``MEMO_BYTES`` bytes;
a value orjson refuses sends the whole reply the old way.
"""

from __future__ import annotations

import threading
from array import array
from collections import OrderedDict
from collections.abc import Callable, Hashable, Sequence
from itertools import repeat
from operator import add, is_
from typing import Any

from attrs import evolve

from lamina.model.context import AssembledContext
from lamina.serde import unstructure

#: How many streams' last replies are kept (the kernel keeps as many streams' layouts).
STREAMS = 32
#: At most this many bytes of replies are kept over all streams.
MEMO_BYTES = 128 * 1024 * 1024
#: Items compared at once when following a run of reused items (then twice as many, …).
_STEP = 16
#: A last reply's items from where a new item was met on are looked for elsewhere only when
#: more than this many are left (fewer are written again rather than indexed).
_NEAR = 4
#: Where the arrays go in the rest of the reply, until they are joined in: control
#: characters, which JSON text never holds raw.
_HISTORY, _TOOLS, _BLOCKS = b"\x00", b"\x02", b"\x01"

Chunk = bytes | memoryview


class Written:
    """One array as a stream's last reply wrote it: its items, its JSON between the brackets
    (``json``, a view of that reply) and where each item's JSON ends in it (``ends``, machine
    integers: a run of them is copied, not counted out)."""

    __slots__ = ("_at", "ends", "items", "json")

    def __init__(self, items: tuple[object, ...], json: Chunk, ends: array[int]) -> None:
        self.items, self.json, self.ends = items, json, ends
        self._at: dict[int, int] | None = None

    def position(self, item: object) -> int | None:
        """Where ``item`` (that very object) is among the items, if it is."""
        if self._at is None:
            self._at = dict(zip(map(id, self.items), range(len(self.items)), strict=True))
        return self._at.get(id(item))

    def start(self, j: int) -> int:
        """Where item ``j``'s JSON starts (after the comma before it)."""
        return self.ends[j - 1] + 1 if j else 0


_NOTHING = Written((), b"", array("q"))


class Stream:
    """A stream's last reply: its bytes, the history, the tools and the report's blocks in
    it."""

    __slots__ = ("blocks", "body", "history", "tools")

    def __init__(self, body: bytes, history: Written, tools: Written, blocks: Written) -> None:
        self.body, self.history, self.tools, self.blocks = body, history, tools, blocks


class Array:
    """An array being written: its chunks (joined by commas) and each item's end."""

    __slots__ = ("chunks", "ends", "items", "size")

    def __init__(self, items: tuple[object, ...]) -> None:
        self.items = items
        self.chunks: list[Chunk] = []
        self.ends = array("q")
        self.size = -1  # bytes so far, less the comma the next chunk brings

    def add(self, chunk: Chunk, ends: array[int] | None = None, start: int = 0) -> None:
        """A chunk: one new item's JSON, or a run of a last reply's (``ends`` from
        ``start``)."""
        at = self.size + 1
        self.chunks.append(chunk)
        self.size = at + len(chunk)
        if ends is None:
            self.ends.append(self.size)
        elif at == start:
            self.ends += ends
        else:
            self.ends.extend(map(add, ends, repeat(at - start)))

    def written(self, body: bytes, at: int) -> Written:
        """The array as it lies in ``body`` from ``at`` (its ``[``)."""
        return Written(self.items, memoryview(body)[at + 1 : at + 1 + max(self.size, 0)], self.ends)


class ContextEncoder:
    """``encode(ctx)``: the context's JSON bytes, the history messages and block reports
    that are the same objects as in the stream's last reply taken from it. Safe to call from
    several threads: a stream's last reply serves one call at a time (another call for the
    same stream meanwhile writes its context whole)."""

    def __init__(
        self,
        dumps: Callable[[Any], bytes],
        *,
        streams: int = STREAMS,
        memo_bytes: int = MEMO_BYTES,
    ) -> None:
        self.dumps = dumps
        self.streams = streams
        self.memo_bytes = memo_bytes
        self._streams: OrderedDict[Hashable, Stream] = OrderedDict()
        self._held = 0
        self._lock = threading.Lock()
        #: Items written and reused since the start (what the tests and a profile read).
        self.written = 0
        self.reused = 0
        try:
            import orjson

            self._orjson: Any = orjson if hasattr(orjson, "Fragment") else None
        except ImportError:  # pragma: no cover - without the serve extra
            self._orjson = None

    def encode(self, ctx: AssembledContext) -> bytes:
        """``dumps(unstructure(ctx))``, made from the stream's last reply where it can."""
        if self._orjson is None:
            return self.dumps(unstructure(ctx))
        key = (ctx.session_label, ctx.model)
        with self._lock:
            last = self._streams.pop(key, None)
            if last is not None:
                self._held -= len(last.body)
        try:
            stream = self._encode(ctx, last)
        except TypeError:  # a value orjson refuses (an integer beyond 64 bits, say)
            return self.dumps(unstructure(ctx))
        self._keep(key, stream)
        return stream.body

    def held(self) -> tuple[int, int]:
        """How many streams and bytes of replies are kept."""
        with self._lock:
            return len(self._streams), self._held

    # -- internals -----------------------------------------------------------------------

    def _encode(self, ctx: AssembledContext, last: Stream | None) -> Stream:
        """The reply in one piece: the rest of the context written with a mark where each
        array goes, then joined with the arrays' chunks."""
        orjson, report = self._orjson, ctx.report
        history = self._array(ctx.history, last.history if last else _NOTHING)
        tools = self._array(ctx.tools, last.tools if last else _NOTHING)
        blocks = self._array(report.blocks, last.blocks if last else _NOTHING)
        data = unstructure(evolve(ctx, history=(), tools=(), report=evolve(report, blocks=())))
        data["history"] = orjson.Fragment(_HISTORY)
        data["tools"] = orjson.Fragment(_TOOLS)
        data["report"]["blocks"] = orjson.Fragment(_BLOCKS)
        # The three arrays come in the order of the context's fields: history, tools, report.
        head, _, rest = orjson.dumps(data).partition(_HISTORY)
        between, _, rest = rest.partition(_TOOLS)
        middle, _, tail = rest.partition(_BLOCKS)
        body = b"".join(
            [head, *_pieces(history), between, *_pieces(tools), middle, *_pieces(blocks), tail]
        )
        at = len(head)
        tools_at = at + max(history.size, 0) + 2 + len(between)
        blocks_at = tools_at + max(tools.size, 0) + 2 + len(middle)
        return Stream(
            body,
            history.written(body, at),
            tools.written(body, tools_at),
            blocks.written(body, blocks_at),
        )

    def _array(self, items: Sequence[object], last: Written) -> Array:
        """``items`` as chunks: each run of the same objects as ``last`` held is one slice of
        its JSON, each other item written."""
        dumps, was = self._orjson.dumps, last.items
        out = Array(items if isinstance(items, tuple) else tuple(items))
        items = out.items
        i, j, n, written = 0, 0, len(items), 0
        while i < n:
            item = items[i]
            if j >= len(was) or was[j] is not item:
                found = last.position(item) if len(was) - j > _NEAR else None
                if found is None:
                    out.add(dumps(unstructure(item)))
                    written += 1
                    i, j = i + 1, j + 1  # a new item most often takes an old one's place
                    continue
                j = found
            run = _same_run(items, i, was, j)
            start = last.start(j)
            out.add(last.json[start : last.ends[j + run - 1]], last.ends[j : j + run], start)
            i, j = i + run, j + run
        self.written += written
        self.reused += n - written
        return out

    def _keep(self, key: Hashable, stream: Stream) -> None:
        size = len(stream.body)
        if size > self.memo_bytes:
            return
        with self._lock:
            if key in self._streams:  # another reply for the stream finished first
                self._held -= len(self._streams.pop(key).body)
            self._streams[key] = stream
            self._held += size
            while len(self._streams) > self.streams or self._held > self.memo_bytes:
                self._held -= len(self._streams.popitem(last=False)[1].body)


def _pieces(array: Array) -> list[Chunk]:
    """``[``, the chunks with commas between them, ``]``: to join with the rest at once."""
    if not array.chunks:
        return [b"[]"]
    out: list[Chunk] = [b","] * (2 * len(array.chunks) + 1)
    out[1::2] = array.chunks
    out[0], out[-1] = b"[", b"]"
    return out


def _same_run(a: tuple[object, ...], i: int, b: tuple[object, ...], j: int) -> int:
    """How many items from ``a[i]`` on are the very objects from ``b[j]`` on (``a[i]`` is
    ``b[j]``): compared a chunk at a time, each chunk twice the last."""
    most = min(len(a) - i, len(b) - j)
    done, step = 0, _STEP
    while done < most:
        k = min(step, most - done)
        if all(map(is_, a[i + done : i + done + k], b[j + done : j + done + k])):
            done, step = done + k, 2 * step
            continue
        while a[i + done] is b[j + done]:  # the chunk holds a different one: find it
            done += 1
        return done
    return done

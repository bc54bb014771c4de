"""A history that grew by a turn is rendered from what the previous assembly of the stream
rendered: only the new messages are made (their messages, block reports and share of the
stable prefix's hash; the hash goes on from the previous one's), and the context is byte for
byte what a fresh assembler gives."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import lamina.assembly.engine as engine
from lamina import Block, Chunked
from lamina.assembly.state import Item
from lamina.serde import to_json
from lamina.testing import StaticProvider, make_assembler
from lamina.testing.history import words


def _turn(n: int) -> list[Block]:
    return [
        Block.text(f"t{n}u", "session", words(12, n), role="user", group=f"t{n}"),
        Block.text(f"t{n}a", "session", words(15, n + 1), role="assistant", group=f"t{n}"),
    ]


class Reads:
    """Counts reads of ``Item.memo_message`` (each history item the format phase looks at)."""

    def __init__(self, slot: object) -> None:
        self.slot, self.count = slot, 0

    def __get__(self, item: object, owner: type | None = None) -> object:
        if item is None:
            return self
        self.count += 1
        return self.slot.__get__(item, owner)  # type: ignore[attr-defined]

    def __set__(self, item: object, value: object) -> None:
        self.slot.__set__(item, value)  # type: ignore[attr-defined]


def _strip(ctx: object) -> str:
    return to_json(ctx).split('"timings_ms"')[0]


@pytest.mark.parametrize("system", ["Be brief.", None])
def test_a_grown_history_renders_only_its_new_messages(
    monkeypatch: pytest.MonkeyPatch, system: str | None
) -> None:
    history = [b for n in range(200) for b in _turn(n)]
    head = [Block.text("rules", "workspace", system, trusted=True)] if system else []
    current = {"blocks": [*head, *history]}
    config = {"model": "gpt-4o", "budget": {"max_tokens": 100_000}}
    warm = make_assembler(config, plugins=[("f", StaticProvider(lambda ctx: current["blocks"]))])
    warm.assemble(warm.request("q"))
    reads = Reads(Item.__dict__["memo_message"])
    monkeypatch.setattr(Item, "memo_message", reads)
    for n in range(200, 240):
        history = history + _turn(n)
        current["blocks"] = [*head, *history]
        reads.count = 0
        got = warm.assemble(warm.request(f"q{n}"))
        assert reads.count <= 4  # the two new messages (made, then read), not all 400 again
        fresh = make_assembler(config, plugins=[("f", StaticProvider(list(current["blocks"])))])
        assert _strip(got) == _strip(fresh.assemble(fresh.request(f"q{n}")))
        assert len(got.history) == len(history)
        fresh.close()
    warm.close()


def test_a_grown_history_after_the_system_prompt_changed_is_hashed_afresh() -> None:
    history = [b for n in range(50) for b in _turn(n)]
    current = {"blocks": [Block.text("rules", "workspace", "One.", trusted=True), *history]}
    config = {"model": "gpt-4o", "budget": {"max_tokens": 100_000}}
    warm = make_assembler(config, plugins=[("f", StaticProvider(lambda ctx: current["blocks"]))])
    first = warm.assemble(warm.request("q"))
    history = history + _turn(50)
    current["blocks"] = [Block.text("rules", "workspace", "Two.", trusted=True), *history]
    second = warm.assemble(warm.request("q"))
    fresh = make_assembler(config, plugins=[("f", StaticProvider(list(current["blocks"])))])
    assert _strip(second) == _strip(fresh.assemble(fresh.request("q")))
    assert first.report.stable_prefix != second.report.stable_prefix


def _layout(assembler: object) -> object:
    (layout,) = assembler._layouts._layouts.values()  # type: ignore[attr-defined]
    return layout


def test_a_growing_stream_keeps_one_copy_of_its_blocks_and_no_chain_of_buckets(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Gather's copy of a provider's blocks is the one the layout's run keeps, and a history
    that keeps fitting (its groups never made) holds at most one older bucket to make them
    from: a long session does not keep every earlier request's bucket. (The full pipeline's
    layout: calls grown from the previous one leave it as it is, see ``test_grown``.)"""
    monkeypatch.setattr(engine, "grown", lambda *_: None)
    history = [b for n in range(20) for b in _turn(n)]
    current = {"blocks": list(history)}
    config = {"model": "gpt-4o", "budget": {"max_tokens": 100_000}}
    warm = make_assembler(config, plugins=[("f", StaticProvider(lambda ctx: current["blocks"]))])
    for n in range(20, 60):
        current["blocks"] = current["blocks"] + _turn(n)
        warm.assemble(warm.request("q"))
        layout = _layout(warm)
        for key, run in layout.runs.items():
            assert run.blocks is layout.checked[key].blocks
            for bucket in run.buckets.values():
                assert bucket.parent is None or bucket.parent.parent is None
    tight = warm.assemble(warm.request("q", max_tokens=900))  # groups needed: made now
    fresh = make_assembler(config, plugins=[("f", StaticProvider(list(current["blocks"])))])
    assert _strip(tight) == _strip(fresh.assemble(fresh.request("q", max_tokens=900)))
    warm.close()
    fresh.close()


@pytest.mark.parametrize("seed", range(12))
def test_the_newest_groups_sizes_are_those_of_the_groups(seed: int) -> None:
    """``Cutter.recent_sizes`` (walked back from the newest items) gives the last sizes of
    ``groups`` (made from all of them), groups spanning buckets and ungrouped items too."""
    import random

    from lamina.assembly.history import Cutter
    from lamina.assembly.layout import Bucket
    from lamina.records import LayerSpec

    rng = random.Random(seed)
    spec = LayerSpec(name="session", order=50, placement="history", cut_rank=2)
    items, group = [], None
    for n in range(rng.randint(0, 30)):
        if rng.random() < 0.4:
            group = rng.choice([None, f"g{n}"])
        block = Block.text(f"b{n}", "session", "x", role="user", group=group)
        item = Item(
            block=block, spec=spec, placement="history", required=False, index=n, plugin="f"
        )
        item.original_tokens, item.charge = rng.randint(1, 50), rng.randint(0, 4)
        items.append(item)
    cut = rng.randint(0, len(items))
    buckets = [
        Bucket(
            order=50,
            items=part,
            size=len(part),
            layer="session",
            placement="history",
            capped=[],
            tools=[],
        )
        for part in (items[:cut], items[cut:])
    ]
    for count in range(0, 8):
        walked = Cutter(tokenizer=None, measurer=None, strategy=None, minimum_recent=0)  # type: ignore[arg-type]
        walked.history = buckets
        made = Cutter(tokenizer=None, measurer=None, strategy=None, minimum_recent=0)  # type: ignore[arg-type]
        made.history = buckets
        sizes = made.groups(items)[1]
        assert walked.recent_sizes(items, count) == sizes[len(sizes) - min(count, len(sizes)) :]


def test_a_history_that_grew_then_went_back_to_an_older_turn_is_placed_afresh() -> None:
    """A grown bucket goes on with its parent's item list; going back to the shorter history
    (a retry pinned to an older turn) or to a branch off it never reuses that list as it now
    is: each assembly is what a fresh assembler gives."""
    base = [b for n in range(10) for b in _turn(n)]
    current = {"blocks": list(base)}
    config = {"model": "gpt-4o", "budget": {"max_tokens": 100_000}}
    warm = make_assembler(config, plugins=[("f", StaticProvider(lambda ctx: current["blocks"]))])
    steps = [
        base + _turn(10),
        base + _turn(10) + _turn(11),
        list(base),  # back to the older turn
        base + _turn(20),  # a branch off it
        base + _turn(20) + _turn(21),
    ]
    for blocks in steps:
        current["blocks"] = blocks
        got = warm.assemble(warm.request("q"))
        fresh = make_assembler(config, plugins=[("f", StaticProvider(list(blocks)))])
        assert _strip(got) == _strip(fresh.assemble(fresh.request("q")))
        fresh.close()
        layout = _layout(warm)
        for run in layout.runs.values():
            for bucket in run.buckets.values():
                assert len(bucket.items) == bucket.size
    warm.close()


def test_a_provider_that_changes_its_own_list_in_place_is_seen_each_time() -> None:
    """A provider may hand back one list it goes on changing (the ledger appends to its
    own): gather copies it before reading it, so each assembly sees the list as it was given,
    whether it grew, had a block replaced in place or lost its last one."""
    held = [b for n in range(30) for b in _turn(n)]
    config = {"model": "gpt-4o", "budget": {"max_tokens": 100_000}}
    warm = make_assembler(config, plugins=[("f", StaticProvider(lambda ctx: held))])
    changes = [
        lambda: held.extend(_turn(30)),
        lambda: held.extend(_turn(31) + _turn(32)),
        lambda: held.__setitem__(5, Block.text("t2a", "session", "edited", role="assistant")),
        lambda: held.pop(),
        lambda: held.extend(_turn(33)),
    ]
    for change in changes:
        change()
        got = warm.assemble(warm.request("q"))
        fresh = make_assembler(config, plugins=[("f", StaticProvider(list(held)))])
        assert _strip(got) == _strip(fresh.assemble(fresh.request("q")))
        fresh.close()
    warm.close()


class Counted(Chunked[Block]):
    """Counts the items read by iterating it whole (what a copy or a comparison item by
    item does); slices of the new blocks do not count."""

    reads = 0

    def __iter__(self) -> Iterator[Block]:
        for block in super().__iter__():
            Counted.reads += 1
            yield block


def test_a_providers_chunked_blocks_that_grew_are_not_copied_or_compared() -> None:
    """A provider that gives a ``Chunked`` grown from its last (as the ledger does) is taken
    as it is: gather proves the old blocks unchanged from the shared chunks, so a request
    reads only the new turn's blocks, and the context equals a fresh assembler's."""
    current: dict[str, Chunked[Block]] = {
        "blocks": Counted(b for n in range(300) for b in _turn(n))
    }
    config = {"model": "gpt-4o", "budget": {"max_tokens": 400_000}}
    warm = make_assembler(config, plugins=[("f", StaticProvider(lambda ctx: current["blocks"]))])
    warm.assemble(warm.request("q"))
    for n in range(300, 320):
        current["blocks"] = current["blocks"].grown(_turn(n))
        Counted.reads = 0
        got = warm.assemble(warm.request("q"))
        assert Counted.reads == 0
        fresh = make_assembler(config, plugins=[("f", StaticProvider(list(current["blocks"])))])
        assert _strip(got) == _strip(fresh.assemble(fresh.request("q")))
        fresh.close()
    warm.close()

"""Warm assembly reuses what the previous assembly of the same stream placed, measured and cut
(see ``lamina.assembly.layout``). Whatever reuse happens, an assembler that has assembled
before gives byte for byte what a fresh one gives for the same inputs: checked over random
sequences of histories that grow, lose their oldest turns, change a block, carry tool calls
and capped blocks, under changing budgets, overrides and sessions. And the dropped blocks a
report sums up per layer are exactly the ones a verbose report lists."""

from __future__ import annotations

import threading

from hypothesis import given, settings
from hypothesis import strategies as st

from lamina import Block, BudgetError
from lamina.model.messages import TextPart, ToolCallPart, ToolResultPart
from lamina.serde import to_json
from lamina.testing import StaticProvider, make_assembler
from lamina.testing.history import words

CONFIGS = [
    {"fit": {"strategy": "rollingWindow", "minimum_recent": 1}},
    {"fit": {"strategy": "truncateMiddle", "minimum_recent": 2}},
    {"fit": {"strategy": "truncateMiddle"}, "layers": {"session": {"max_tokens": 700}}},
    {"fit": {"strategy": "rollingWindow"}, "layers": {"memory": {"max_tokens": 60}}},
    {"fit": {"strategy": "rollingWindow"}, "placement": {"memory": "history"}},
]


def _turn(n: int, size: int, tools: bool) -> list[Block]:
    user = Block.text(f"t{n}u", "session", words(size, n), role="user", group=f"t{n}")
    if not tools:
        reply = Block.text(f"t{n}a", "session", words(size, n + 7), role="assistant", group=f"t{n}")
        return [user, reply]
    call = Block(
        id=f"t{n}c",
        layer="session",
        role="assistant",
        group=f"t{n}",
        content=(ToolCallPart(id=f"c{n}", name="read", arguments={"n": n}),),
    )
    result = Block(
        id=f"t{n}r",
        layer="session",
        role="user",
        group=f"t{n}",
        content=(ToolResultPart(call_id=f"c{n}", content=words(size + n % 3 * size, n + 3)),),
    )
    return [user, call, result]


@st.composite
def steps(draw):
    """A config, and steps: (what happens to the history, max_tokens, overrides, session)."""
    config = draw(st.sampled_from(CONFIGS))
    ops = draw(
        st.lists(
            st.tuples(
                st.sampled_from(
                    ["same", "grow", "grow2", "grow", "extend", "compact", "edit", "memory"]
                ),
                st.sampled_from([None, 300, 500, 700, 900, 1400, 2500]),
                st.sampled_from([{}, {"minimum_recent": 0}, {"strategy": "rollingWindow"}]),
                st.sampled_from(["a", "a", "b"]),
                st.booleans(),
            ),
            min_size=1,
            max_size=8,
        )
    )
    return config, ops, draw(st.integers(0, 1000))


def _same(first, second) -> None:
    strip = lambda c: to_json(c).split('"timings_ms"')[0]  # noqa: E731
    assert strip(first) == strip(second)


@settings(deadline=None)
@given(steps())
def test_a_warm_assembler_gives_what_a_fresh_one_gives(case):
    config, ops, seed = case
    config = {"model": "gpt-4o", "budget": {"reserve_response": 0, "reserve_tools": 0}, **config}
    rules = Block.text("rules", "workspace", "Be brief.", trusted=True)
    history = [b for n in range(6) for b in _turn(n, 20 + seed % 30, n == seed % 8)]
    memory: list[Block] = []
    current = {"blocks": [rules, *history]}
    warm = make_assembler(
        config, plugins=[("fixture", StaticProvider(lambda ctx: current["blocks"]))]
    )
    turns = 6
    for op, max_tokens, overrides, session, verbose in ops:
        if op == "grow":
            history = history + _turn(turns, 15 + (seed + turns) % 40, turns % 3 == 0)
            turns += 1
        elif op == "grow2":
            history = history + _turn(turns, 30, False) + _turn(turns + 1, 25, True)
            turns += 2
        elif op == "extend" and history:  # the last turn goes on (a tool result, a reply)
            last = history[-1]
            more = Block.text(
                f"{last.id}+{turns}",
                "session",
                words(25 + seed % 50, turns),
                role="user",
                group=last.group,
            )
            history = [*history, more]
            turns += 1
        elif op == "compact" and len(history) > 4:
            summary = Block.text(f"sum{turns}", "session", words(12, turns), role="user")
            history = [summary, *history[len(history) // 2 :]]
        elif op == "edit" and history:
            old = history[-1]
            history = [
                *history[:-1],
                Block.text(old.id, "session", words(9, turns), role=old.role, group=old.group),
            ]
        elif op == "memory":
            memory = [
                Block.text(f"mem{turns}", "memory", words(40, turns), priority=0.3),
                Block.text("note", "memory", words(30, seed), max_tokens=20, priority=0.6),
            ]
        current["blocks"] = [rules, *history, *memory]
        request = warm.request("next?", session_label=session, max_tokens=max_tokens)
        fresh = make_assembler(
            config, plugins=[("fixture", StaticProvider(list(current["blocks"])))]
        )
        outcomes = []
        for assembler in (fresh, warm, warm):  # warm twice: the second takes the first's cut
            try:
                outcomes.append(assembler.assemble(request, verbose_report=verbose, **overrides))
            except BudgetError as exc:
                outcomes.append(str(exc))
        for outcome in outcomes[1:]:
            if isinstance(outcome, str) or isinstance(outcomes[0], str):
                assert outcome == outcomes[0]
            else:
                _same(outcome, outcomes[0])
        fresh.close()
    warm.close()


@settings(deadline=None)
@given(steps())
def test_the_summary_of_dropped_blocks_is_what_a_verbose_report_lists(case):
    config, ops, seed = case
    config = {"model": "gpt-4o", "budget": {"reserve_response": 0, "reserve_tools": 0}, **config}
    blocks = [
        Block.text("m1", "memory", words(80, seed), priority=0.2),
        Block.text("m2", "memory", words(50, seed + 1), priority=0.1, truncation="never"),
        *(b for n in range(8) for b in _turn(n, 25 + seed % 20, n % 4 == 2)),
    ]
    a = make_assembler(config, plugins=[("fixture", StaticProvider(blocks))])
    try:
        short = a.assemble(a.request("q", max_tokens=ops[0][1] or 600))
    except BudgetError:
        return
    full = a.assemble(a.request("q", max_tokens=ops[0][1] or 600), verbose_report=True)
    assert not short.report.verbose and full.report.verbose
    assert short.report.dropped == full.report.dropped
    assert [b for b in full.report.blocks if b.status != "dropped"] == list(short.report.blocks)
    for summary in full.report.dropped:
        listed = [
            b for b in full.report.blocks if b.status == "dropped" and b.layer == summary.layer
        ]
        assert summary.blocks == len(listed)
        assert summary.original_tokens == sum(b.original_tokens for b in listed)
        assert (summary.first_id, summary.last_id) == (listed[0].id, listed[-1].id)
        assert set(summary.reasons) == {b.reason for b in listed}
    layers = {lr.layer: lr for lr in full.report.layers}
    for summary in short.report.dropped:
        assert layers[summary.layer].kept == layers[summary.layer].blocks - summary.blocks


def test_warm_assemblies_of_the_same_blocks_mark_nothing_again():
    """The second assembly of an unchanged 400-message history reuses the first one's cut:
    same bytes, and the dropped blocks are reported in aggregate (first and last ids)."""
    history = [b for n in range(200) for b in _turn(n, 60, False)]
    a = make_assembler(
        {"model": "gpt-4o", "budget": {"max_tokens": 8000}, "fit": {"strategy": "rollingWindow"}},
        plugins=[("fixture", StaticProvider(history))],
    )
    first = a.assemble(a.request("q"))
    second = a.assemble(a.request("q"))
    _same(first, second)
    (dropped,) = second.report.dropped
    assert dropped.layer == "session" and dropped.first_id == "t0u"
    assert dropped.blocks == 400 - sum(
        1 for b in second.report.blocks if b.layer == "session" and b.plugin == "fixture"
    )
    assert dropped.reasons == ("history cut by rollingWindow",)
    assert all(b.status != "dropped" for b in second.report.blocks)


def test_streams_assembled_side_by_side_match_one_at_a_time():
    """One assembler, several sessions assembled on threads at once: each gives what it gives
    alone (a stream's layout serves one call at a time)."""
    sessions = {
        f"s{k}": [b for n in range(30 + 10 * k) for b in _turn(n, 40 + k, n % 5 == 0)]
        for k in range(4)
    }
    a = make_assembler(
        {"model": "gpt-4o", "budget": {"max_tokens": 3000}},
        plugins=[("fixture", StaticProvider(lambda ctx: sessions[ctx.request.session_label]))],
    )
    alone = {s: a.assemble(a.request("q", session_label=s)) for s in sessions}
    results: dict[str, list] = {s: [] for s in sessions}

    def work(session: str) -> None:
        for _ in range(5):
            results[session].append(a.assemble(a.request("q", session_label=session)))

    threads = [threading.Thread(target=work, args=(s,)) for s in sessions for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for session, contexts in results.items():
        assert len(contexts) == 10
        for ctx in contexts:
            _same(ctx, alone[session])


def test_a_text_part_changed_in_place_is_a_new_block():
    """Reuse is by block identity (or equality): a block rebuilt with other text is measured
    afresh."""
    history = [b for n in range(20) for b in _turn(n, 50, False)]
    current = {"blocks": history}
    a = make_assembler(
        {"model": "gpt-4o", "budget": {"max_tokens": 2000}},
        plugins=[("fixture", StaticProvider(lambda ctx: current["blocks"]))],
    )
    before = a.assemble(a.request("q"))
    last = history[-1]
    changed = Block(
        id=last.id,
        layer="session",
        role=last.role,
        group=last.group,
        content=(TextPart(text="ok"),),
    )
    current["blocks"] = [*history[:-1], changed]
    after = a.assemble(a.request("q"))
    assert after.history[-1].text == "ok" and before.history[-1].text != "ok"
    fresh = make_assembler(
        {"model": "gpt-4o", "budget": {"max_tokens": 2000}},
        plugins=[("fixture", StaticProvider(current["blocks"]))],
    )
    _same(after, fresh.assemble(fresh.request("q")))


def test_the_same_history_under_another_budget_is_cut_again():
    """A stream's previous cut is reused only when the new one keeps the same groups: a
    smaller or larger budget, or more protected turns, cuts afresh."""
    history = [b for n in range(40) for b in _turn(n, 30, n % 7 == 3)]
    config = {"model": "gpt-4o", "fit": {"strategy": "truncateMiddle", "minimum_recent": 1}}
    warm = make_assembler(config, plugins=[("fixture", StaticProvider(history))])
    for max_tokens, overrides in (
        (3000, {}),
        (1500, {}),
        (1500, {"minimum_recent": 3}),
        (6000, {}),
        (1500, {}),
        (1500, {"strategy": "rollingWindow"}),
    ):
        fresh = make_assembler(config, plugins=[("fixture", StaticProvider(history))])
        request = warm.request("q", max_tokens=max_tokens)
        _same(warm.assemble(request, **overrides), fresh.assemble(request, **overrides))


def test_a_verbose_report_from_config_or_for_one_call():
    history = [b for n in range(30) for b in _turn(n, 40, False)]
    config = {"model": "gpt-4o", "budget": {"max_tokens": 1500}}
    quiet = make_assembler(config, plugins=[("fixture", StaticProvider(history))])
    loud = make_assembler(
        {**config, "report": {"verbose": True}}, plugins=[("fixture", StaticProvider(history))]
    )
    request = quiet.request("q")
    summed = quiet.assemble(request).report
    assert summed.dropped and not summed.verbose
    assert all(b.status != "dropped" for b in summed.blocks)
    for report in (
        loud.assemble(request).report,
        quiet.assemble(request, verbose_report=True).report,
    ):
        assert report.verbose and report.dropped == summed.dropped
        gone = [b.id for b in report.blocks if b.status == "dropped"]
        assert len(gone) == summed.dropped[0].blocks
        assert (gone[0], gone[-1]) == (summed.dropped[0].first_id, summed.dropped[0].last_id)
    assert loud.assemble(request, verbose_report=False).report.verbose is False


def test_a_growing_session_is_cut_like_a_fresh_one_turn_after_turn():
    """Turn after turn (a new turn, or the last one going on with longer and longer
    messages), under budgets that cut the oldest, the middle or, with nothing protected, the
    newest turn: each assembly equals a fresh assembler's."""
    for strategy, minimum, max_tokens, tools in (
        ("rollingWindow", 1, 1500, True),
        ("truncateMiddle", 2, 1800, True),
        ("rollingWindow", 0, 700, False),  # the newest turn outgrows the budget, and grows
        ("truncateMiddle", 0, 600, False),
    ):
        pool = [b for n in range(60) for b in _turn(n, 25 + n % 9 * 8, tools and n % 5 == 2)]
        config = {"model": "gpt-4o", "fit": {"strategy": strategy, "minimum_recent": minimum}}
        current: dict[str, list[Block]] = {"blocks": pool[:10]}
        warm = make_assembler(
            config,
            plugins=[("fixture", StaticProvider(lambda ctx, now=current: now["blocks"]))],
        )
        history = list(pool[:10])
        for step in range(40):
            if step % 5 in (2, 3, 4):  # the last turn goes on
                last = history[-1]
                text = words(60 + (step % 5) * 90, step)
                more = Block.text(
                    f"{last.id}+{step}", "session", text, role="user", group=last.group
                )
                history.append(more)
            else:
                history.append(pool[10 + step])
            current["blocks"] = list(history)
            fresh = make_assembler(config, plugins=[("fixture", StaticProvider(list(history)))])
            request = warm.request("q", max_tokens=max_tokens)
            got = []
            for assembler in (warm, fresh):
                try:  # every other step verbose: each block's own status shows
                    got.append(assembler.assemble(request, verbose_report=step % 2 == 1))
                except BudgetError as exc:
                    got.append(str(exc))
            if isinstance(got[0], str) or isinstance(got[1], str):
                assert got[0] == got[1], (strategy, minimum, step)
            else:
                _same(*got)


def test_the_same_event_gives_the_same_blocks_and_another_event_new_ones():
    """The event provider is a function of the event, the role and the time: asked again
    with the same ones it returns the same block objects (which the kernel does not measure
    again); anything else is built afresh."""
    from lamina.builtins import event_plugin

    a = make_assembler({"model": "gpt-4o"})
    request = a.request("hello")
    first = a.assemble(request)
    blocks = event_plugin._last[1] if event_plugin._last else []
    again = a.assemble(request)
    assert event_plugin._last is not None and event_plugin._last[1] is blocks
    _same(first, again)
    other = a.assemble(a.request("hello", role="manager", platform="slack"))
    assert event_plugin._last[1] is not blocks
    assert "Platform: slack" in other.current_message.text
    assert "Platform" not in a.assemble(request).current_message.text


def test_an_assembler_keeps_a_bounded_number_of_renderings(monkeypatch):
    # Every request's event renders anew; a long-running host must not keep them all.
    import lamina.assembly.measure as measure

    monkeypatch.setattr(measure, "RENDERS", 8)
    a = make_assembler({"model": "gpt-4o"})
    contexts = [a.assemble(a.request(f"message number {i}")) for i in range(30)]
    assert len(a._render_cache) <= 8
    fresh = make_assembler({"model": "gpt-4o"})
    again = fresh.assemble(fresh.request("message number 29"))
    assert again.current_message == contexts[-1].current_message


def test_an_unchanged_system_prompt_is_joined_and_digested_once(monkeypatch):
    """The system prompt is the same string while its blocks render the same, and its count
    is found without digesting it again; a changed block gives a new prompt, counted."""
    import lamina.tokens

    digested: list[str] = []
    key = lamina.tokens._key
    monkeypatch.setattr(lamina.tokens, "_key", lambda text: digested.append(text) or key(text))
    rules = Block.text("rules", "workspace", words(400, 1), trusted=True)
    persona = Block.text("persona", "persona", words(300, 2), trusted=True)
    static = StaticProvider([rules, persona])
    a = make_assembler({"model": "gpt-4o"}, plugins=[("fixture", static)])
    first = a.assemble(a.request("first"))
    digested.clear()
    second = a.assemble(a.request("second"))
    assert second.system_prompt is first.system_prompt
    assert first.system_prompt not in digested
    assert second.token_budget.used.system_prompt == first.token_budget.used.system_prompt
    static.blocks = [rules, Block.text("persona", "persona", words(301, 2), trusted=True)]
    changed = a.assemble(a.request("third"))
    fresh = make_assembler({"model": "gpt-4o"}, plugins=[("fixture", static)])
    _same(changed, fresh.assemble(fresh.request("third")))
    assert changed.system_prompt != first.system_prompt

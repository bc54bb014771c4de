"""The kernel's guarantees as properties over random blocks, budgets and strategies, checked
with the exact o200k tokenizer: never over budget, required content never cut, the last turns
kept verbatim, at least one message, same inputs → same bytes."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from lamina import Block, BudgetError
from lamina.serde import to_json
from lamina.testing import StaticProvider, make_assembler
from lamina.tokens import TiktokenTokenizer

O200K = TiktokenTokenizer("o200k_base")
#: OpenAI's published chat framing for gpt-4o (cookbook): per message, and priming the reply.
MESSAGE, REPLY = 4, 3

text = st.text(
    alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=0, max_size=300
)
words = st.lists(
    st.sampled_from(["alpha", "beta", "é", "日本", "🦜", "x=1;", "\n", "</context>"]),
    min_size=1,
    max_size=120,
).map(" ".join)
content = st.one_of(text, words)


@st.composite
def scenario(draw):
    blocks = []
    for i in range(draw(st.integers(0, 2))):
        blocks.append(
            Block.text(
                f"sys{i}",
                draw(st.sampled_from(["workspace", "persona"])),
                draw(content),
                trusted=True,
            )
        )
    for i in range(draw(st.integers(0, 5))):
        blocks.append(
            Block.text(
                f"mem{i}",
                "memory",
                draw(content),
                priority=draw(st.floats(0, 1)),
                truncation=draw(st.sampled_from(["never", "start", "middle", "end"])),
                min_tokens=draw(st.integers(0, 20)),
                trusted=draw(st.booleans()),
            )
        )
    turns = draw(st.integers(0, 12))
    for n in range(turns):
        blocks.append(Block.text(f"t{n}u", "session", draw(content), role="user", group=f"t{n}"))
        blocks.append(
            Block.text(f"t{n}a", "session", draw(content), role="assistant", group=f"t{n}")
        )
    config = {
        "model": "gpt-4o",
        "budget": {
            "max_tokens": draw(st.integers(30, 4000)),
            "reserve_response": 0,
            "reserve_tools": 0,
        },
        "fit": {
            "strategy": draw(st.sampled_from(["truncateMiddle", "rollingWindow", "stopAtLimit"])),
            "minimum_recent": draw(st.integers(0, 4)),
        },
    }
    caps = draw(st.one_of(st.none(), st.integers(0, 500)))
    if caps is not None:
        config["layers"] = {"memory": {"max_tokens": caps}}
    return blocks, config, turns, draw(content)


def assemble(blocks, config, message):
    a = make_assembler(config, plugins=[("fixture", StaticProvider(blocks))])
    return a.assemble(a.request(message))


@given(scenario())
def test_guarantees(case):
    blocks, config, turns, message = case
    budget = config["budget"]["max_tokens"]
    try:
        ctx = assemble(blocks, config, message)
    except BudgetError as exc:
        assert exc.overage > 0 and exc.available == budget
        if config["fit"]["strategy"] != "stopAtLimit":
            # Only when what must stay (system, event, protected turns) really does not fit.
            loose = dict(
                config, budget={"max_tokens": 10**6, "reserve_response": 0, "reserve_tools": 0}
            )
            full = assemble(blocks, loose, message)
            keep = min(config["fit"]["minimum_recent"], turns)
            protected = full.history[len(full.history) - 2 * keep :] if keep else ()
            needed = (
                full.token_budget.used.system_prompt
                + full.token_budget.used.event
                + sum(O200K.count(m.text) + MESSAGE for m in protected)
            )
            assert needed + 2 * (len(blocks) + 2) > budget
        return

    used = ctx.token_budget.used
    # Never over budget, by an independent recount of the final messages with the exact
    # tokenizer and OpenAI's framing (a system message only when there is a system prompt).
    messages = [ctx.system_prompt] if ctx.system_prompt else []
    messages += [m.text for m in ctx.history] + [ctx.current_message.text]
    recount = sum(O200K.count(m) + MESSAGE for m in messages) + REPLY
    assert recount == used.total <= ctx.token_budget.available == budget

    # Required content is never cut: system blocks whole, the event content last and whole.
    for b in blocks:
        if b.layer in ("workspace", "persona"):
            assert b.body in ctx.system_prompt
    assert ctx.current_message.text.endswith(message)
    assert ctx.current_message.role == "user"

    # The last minimum_recent turns are kept verbatim.
    keep = min(config["fit"]["minimum_recent"], turns)
    history_texts = [m.text for m in ctx.history]
    for n in range(turns - keep, turns):
        u = next(b for b in blocks if b.id == f"t{n}u")
        a = next(b for b in blocks if b.id == f"t{n}a")
        assert u.body in history_texts and a.body in history_texts

    # History blocks are kept or dropped whole, in order; groups are never split.
    kept_ids = [
        b.id
        for b in ctx.report.blocks
        if b.layer == "session" and b.status == "kept" and not b.id.startswith("history:gap")
    ]
    for n in range(turns):
        assert (f"t{n}u" in kept_ids) == (f"t{n}a" in kept_ids)

    # Same inputs → byte-identical output (timings aside).
    again = assemble(blocks, config, message)
    strip = lambda c: to_json(c).split('"timings_ms"')[0]  # noqa: E731
    assert strip(again) == strip(ctx)

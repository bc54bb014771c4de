"""One huge tool call (an agent writing a whole file through ``write_file``) never stops a
session: its arguments are capped like a tool result, inside protected turns too, and stay
JSON of the same shape (``lamina.assembly.call_caps``)."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from lamina import Block, ToolCallPart, ToolResultPart
from lamina.assembly.call_caps import LEFT_OUT, arguments_json, capped_arguments
from lamina.testing import StaticProvider, make_assembler
from lamina.testing.history import turn
from lamina.tokens import TiktokenTokenizer, TokenCounter

O200K = TokenCounter(TiktokenTokenizer("o200k_base"))
MARKER = "[… some tokens of this write_file call's arguments left out …]"
FILE = "def handler(event):\n    return {'status': \"ok\", 'path': '\\\\srv'}\n" * 4_000


def write_turn(n: int, content: str) -> list[Block]:
    """A turn where the assistant writes ``content`` to a file through a tool call."""
    call = f"call{n}"
    return [
        Block.text(f"t{n}:u", "session", "write the handler", role="user", group=f"t{n}"),
        Block(
            id=f"t{n}:call",
            layer="session",
            role="assistant",
            group=f"t{n}",
            content=(
                ToolCallPart(
                    id=call, name="write_file", arguments={"path": "app.py", "content": content}
                ),
            ),
        ),
        Block(
            id=f"t{n}:result",
            layer="session",
            role="tool",
            group=f"t{n}",
            content=(ToolResultPart(call_id=call, content="written"),),
        ),
    ]


def test_a_huge_call_in_a_protected_turn_is_capped_and_the_context_fits() -> None:
    blocks = [*turn(0, "hi", "hello"), *write_turn(1, FILE)]
    assert O200K.count(arguments_json({"path": "app.py", "content": FILE})) > 60_000
    a = make_assembler({"model": "gpt-4o"}, plugins=[("s", StaticProvider(blocks))])
    with a:
        ctx = a.assemble(a.request("is it done?", max_tokens=20_000))
        again = a.assemble(a.request("is it done?", max_tokens=20_000))
    assert ctx.token_budget.used.total <= 20_000
    [capped] = [b for b in ctx.report.blocks if b.id == "t1:call"]
    assert capped.status == "truncated" and capped.strategy == "tool_call_cap"
    assert capped.original_tokens > 60_000 and capped.tokens <= 5_000  # a quarter of 20,000
    assert "write_file call over its cap of 5000 tokens" in (capped.reason or "")
    [call] = [p for m in ctx.history for p in m.content if isinstance(p, ToolCallPart)]
    assert call.arguments["path"] == "app.py"
    content = call.arguments["content"]
    assert content.startswith(FILE[:300]) and content.endswith(FILE[-300:])
    assert "tokens of this write_file call's arguments left out" in content
    assert again.history == ctx.history  # the same cut every request: the cache prefix holds


def test_a_call_under_its_cap_is_untouched() -> None:
    blocks = [*turn(0, "hi", "hello"), *write_turn(1, "print('hi')\n")]
    a = make_assembler({"model": "gpt-4o"}, plugins=[("s", StaticProvider(blocks))])
    ctx = a.assemble(a.request("done?", max_tokens=20_000))
    assert all(b.status == "kept" for b in ctx.report.blocks)


# Arguments as agents send them: nested objects and lists of strings (with quotes, escapes,
# newlines and non-ASCII text), numbers, booleans and nulls.
texts = st.text(alphabet=st.sampled_from(list('ab "\\\n\té日🦜{}')), max_size=40).map(
    lambda s: s * 40
)
leaves = st.none() | st.booleans() | st.integers() | texts
values = st.recursive(
    leaves,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=8,
)


def strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    items = value.values() if isinstance(value, dict) else value if isinstance(value, list) else []
    return [s for item in items for s in strings(item)]


@settings(max_examples=80, deadline=None)
@given(
    arguments=st.dictionaries(st.text(max_size=6), values, min_size=1, max_size=4),
    cap=st.integers(min_value=1, max_value=600),
)
def test_capped_arguments_fit_and_keep_head_and_tail(arguments: dict[str, Any], cap: int) -> None:
    total = O200K.count(arguments_json(arguments))
    capped = capped_arguments(arguments, cap, total, MARKER, O200K)
    if total <= cap:
        assert capped is arguments
        return
    if set(capped) == {LEFT_OUT}:
        assert capped[LEFT_OUT] == MARKER
        return
    assert O200K.count(arguments_json(capped)) <= cap
    assert json.loads(arguments_json(capped)) == capped
    assert set(capped) == set(arguments)  # the same keys, the same shape
    before, after = strings(arguments), strings(capped)
    assert len(before) == len(after)
    for whole, kept in zip(before, after, strict=True):
        if kept != whole:
            head, _, tail = kept.partition(MARKER)
            assert whole.startswith(head) and whole.endswith(tail)
            assert len(head) + len(tail) < len(whole)

"""With only the kernel installed, per-message framing is charged: gpt-4o and gpt-4 requests
never exceed the budget by OpenAI's own count (its cookbook's), and models whose framing is
not published get a generous default."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lamina import Block
from lamina.builtins import models_plugin
from lamina.testing import StaticProvider, make_assembler
from lamina.tokens import load_encoding

ENCODINGS = {"gpt-4o": "o200k_base", "gpt-4": "cl100k_base"}
ROLES = ("system", "user", "assistant", "tool", "developer")


def cookbook_count(encoding: str, messages: list[tuple[str, str]]) -> int:
    """OpenAI's cookbook "How to count tokens with tiktoken": 3 tokens per message, its role
    and content, then 3 priming the reply; counted with tiktoken itself."""
    enc = load_encoding(encoding)
    total = 3
    for role, content in messages:
        total += 3 + len(enc.encode_ordinary(role)) + len(enc.encode_ordinary(content))
    return total


@pytest.mark.parametrize("encoding", sorted(set(ENCODINGS.values())))
def test_each_role_is_one_token(encoding: str) -> None:
    """Why the kernel charges 3 + 1 per message."""
    enc = load_encoding(encoding)
    assert all(len(enc.encode_ordinary(role)) == 1 for role in ROLES)


@pytest.mark.parametrize(
    ("model", "framing"),
    [
        ("gpt-4o", (4, 3)),
        ("openai/gpt-4.1-mini", (4, 3)),
        ("gpt-4", (4, 3)),
        ("ft:gpt-4o:acme:custom", (4, 3)),  # not in any catalog; tiktoken knows its family
        ("text-embedding-3-small", (0, 0)),  # takes no messages
        ("claude-sonnet-4", models_plugin.DEFAULT_FRAMING),
        ("gemini-2.5-pro", models_plugin.DEFAULT_FRAMING),
        ("mystery-model-7", models_plugin.DEFAULT_FRAMING),
    ],
)
def test_the_fallback_charges_framing(model: str, framing: tuple[int, int]) -> None:
    info = models_plugin.lamina_model_info(model)
    assert (info.message_overhead, info.reply_overhead) == framing
    assert models_plugin.DEFAULT_FRAMING >= models_plugin.OPENAI_FRAMING


text = st.text(
    alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=0, max_size=120
)
words = st.lists(
    st.sampled_from(["ok", "alpha", " ", "\n", "日本", "🦜", "x = 1;", "<|endoftext|>"]),
    min_size=1,
    max_size=40,
).map("".join)
content = st.one_of(text, words)


@settings(max_examples=60, deadline=None)
@given(
    model=st.sampled_from(sorted(ENCODINGS)),
    system=st.lists(content, max_size=2),
    turns=st.lists(st.tuples(content, content), max_size=8),
    message=content,
    budget=st.integers(60, 2000),
    strategy=st.sampled_from(["truncateMiddle", "rollingWindow"]),
)
def test_the_kernel_alone_never_goes_over_by_openais_count(
    model: str,
    system: list[str],
    turns: list[tuple[str, str]],
    message: str,
    budget: int,
    strategy: str,
) -> None:
    blocks = [Block.text(f"s{i}", "workspace", t, trusted=True) for i, t in enumerate(system)]
    for n, (user, assistant) in enumerate(turns):
        blocks.append(Block.text(f"t{n}u", "session", user, role="user", group=f"t{n}"))
        blocks.append(Block.text(f"t{n}a", "session", assistant, role="assistant", group=f"t{n}"))
    config = {
        "model": model,
        "budget": {"max_tokens": budget, "reserve_response": 0, "reserve_tools": 0},
        "fit": {"strategy": strategy, "minimum_recent": 0},
    }
    assembler = make_assembler(config, plugins=[("fixture", StaticProvider(blocks))])
    try:
        ctx = assembler.assemble(assembler.request(message))
    except Exception as exc:  # only a refusal, never a crash
        assert type(exc).__name__ == "BudgetError"
        return
    messages = [("system", ctx.system_prompt)] if ctx.system_prompt else []
    messages += [(m.role, m.text) for m in ctx.history]
    messages.append((ctx.current_message.role, ctx.current_message.text))
    used = ctx.token_budget.used.total
    assert cookbook_count(ENCODINGS[model], messages) <= used <= ctx.token_budget.available

"""The plugin in an assembly: inert without its section; with it, secrets are masked in the
system prompt, history (text, tool calls and results) and current message, the usage matches
the masked text, the report says what was masked, and bad config names the key."""

from __future__ import annotations

import attrs
import lamina_redaction.plugin as redaction
import pytest

from lamina import Block, BudgetError, ConfigError, ToolCallPart, ToolResultPart
from lamina.testing import FAKE_MODEL, FakeModel, FakeTokenizer, StaticProvider, make_assembler

SYSTEM = "Deploy with DB_PASSWORD=hunter22 from the vault."
HISTORY = [
    Block.text("h1", "session", "my key is AKIAIOSFODNN7EXAMPLE", role="user", group="t1"),
    Block(
        id="h2",
        layer="session",
        role="assistant",
        group="t1",
        content=(
            ToolCallPart(
                id="c1", name="http", arguments={"headers": {"auth": "Bearer abcdef0123456789xyz"}}
            ),
        ),
    ),
    Block(
        id="h3",
        layer="session",
        role="tool",
        group="t1",
        content=(ToolResultPart(call_id="c1", content="token: ghp_" + "a1" * 18),),
    ),
]


def plugins(with_redaction=True):
    found = [
        ("fake", FakeModel()),
        ("mem", StaticProvider(HISTORY)),
    ]
    return [*found, ("redaction", redaction)] if with_redaction else found


def config(section=None, **extra):
    cfg = {
        "model": FAKE_MODEL,
        "blocks": [{"id": "ops", "layer": "workspace", "text": SYSTEM, "trusted": True}],
        **extra,
    }
    if section is not None:
        cfg["plugins"] = {"redaction": section}
    return cfg


def assemble(cfg, message="and the stripe key sk_live_0123456789abcdefXYZ", **kw):
    """The assembled context, less the report's timings (the only non-deterministic field)."""
    with make_assembler(cfg, **kw) as a:
        ctx = a.assemble(a.request(message))
    return attrs.evolve(ctx, report=attrs.evolve(ctx.report, timings_ms={}))


def test_inert_without_its_section():
    with_plugin = assemble(config(), plugins=plugins())
    without = assemble(config(), plugins=plugins(with_redaction=False))
    assert with_plugin == without
    assert "hunter22" in with_plugin.system_prompt


def test_enabled_false_masks_nothing():
    ctx = assemble(config({"enabled": False}), plugins=plugins())
    assert "hunter22" in ctx.system_prompt and not ctx.report.warnings


def test_everything_is_masked():
    ctx = assemble(config({}), plugins=plugins())
    assert ctx.system_prompt.startswith(
        "Deploy with DB_PASSWORD=[REDACTED:credential] from the vault."
    )
    user, call, result = ctx.history
    assert user.text == "my key is [REDACTED:aws-access-key]"
    assert call.content[0].arguments == {"headers": {"auth": "Bearer [REDACTED:bearer-token]"}}
    assert result.content[0].content == "token: [REDACTED:github-token]"
    assert ctx.current_message.text.endswith("and the stripe key [REDACTED:stripe-key]")
    assert sorted(ctx.report.warnings) == sorted(
        [
            "plugin 'redaction': masked 1 secret in ops: credential ×1",
            "plugin 'redaction': masked 1 secret in h1: aws-access-key ×1",
            "plugin 'redaction': masked 1 secret in h2: bearer-token ×1",
            "plugin 'redaction': masked 1 secret in h3: github-token ×1",
            "plugin 'redaction': masked 1 secret in event:content: stripe-key ×1",
        ]
    )
    reported = {b.id: b for b in ctx.report.blocks}
    assert reported["h1"].tokens == FakeTokenizer().count("my key is [REDACTED:aws-access-key]")


def test_usage_matches_the_masked_text():
    ctx = assemble(config({}), plugins=plugins())
    tok, used = FakeTokenizer(), ctx.token_budget.used
    assert used.system_prompt == tok.count(ctx.system_prompt)
    assert used.event == tok.count(ctx.current_message.text)
    plain = assemble(config(), plugins=plugins())
    # the history: user text and tool result recounted; the tool call by its JSON arguments
    delta = (
        tok.count("my key is [REDACTED:aws-access-key]")
        - tok.count(HISTORY[0].body)
        + tok.count('{"headers": {"auth": "Bearer [REDACTED:bearer-token]"}}')
        - tok.count('{"headers": {"auth": "Bearer abcdef0123456789xyz"}}')
        + tok.count("token: [REDACTED:github-token]")
        - tok.count("token: ghp_" + "a1" * 18)
    )
    assert used.history == plain.token_budget.used.history + delta
    assert ctx.token_budget.remaining == ctx.token_budget.available - used.total
    prefix, plain_prefix = ctx.report.stable_prefix, plain.report.stable_prefix
    assert prefix.tokens - plain_prefix.tokens == (
        used.system_prompt - plain.token_budget.used.system_prompt + delta
    )


def test_same_input_same_bytes():
    assert assemble(config({}), plugins=plugins()) == assemble(config({}), plugins=plugins())


def test_masks_are_measured_before_fitting():
    long_mask = {"mask": "[" + "x " * 40 + "{kind}]"}
    # Masked, the history no longer fits whole: fitting cuts it, and the result is in budget.
    cfg = config(
        long_mask,
        budget={"max_tokens": 300, "reserve_response": 0, "reserve_tools": 0},
        fit={"minimum_recent": 0},
    )
    ctx = assemble(cfg, plugins=plugins())
    assert ctx.token_budget.used.total <= 300
    assert any(d.layer == "session" for d in ctx.report.dropped)
    # What must not be cut (the masked system prompt and event) is a budget error, not a
    # silently over-budget context.
    cfg = config(long_mask, budget={"max_tokens": 60, "reserve_response": 0, "reserve_tools": 0})
    with pytest.raises(BudgetError, match="over by"):
        assemble(cfg, plugins=plugins())


@pytest.mark.parametrize(
    ("section", "message"),
    [
        ({"kinds": ["aws"]}, r"kinds: unknown kind\(s\) aws.*at key plugins\.redaction"),
        (
            {"mask": "password=hunter22-{kind}"},
            r"mask: .* taken for a secret.* at key plugins\.redaction",
        ),
    ],
    ids=["unknown-kind", "mask-taken-for-a-secret"],
)
def test_a_bad_section_names_the_key(section, message):
    with pytest.raises(ConfigError, match=message):
        make_assembler(config(section), plugins=plugins())

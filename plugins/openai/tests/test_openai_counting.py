"""Exact OpenAI prompt token counts: the cookbook's published figures, the kernel's budget
with this plugin's model info, and tool definitions."""

from __future__ import annotations

from lamina_openai import plugin
from lamina_openai.counting import count_messages, count_tools

from lamina import Block, Tool
from lamina.testing import StaticProvider, make_assembler
from lamina.tokens import TiktokenTokenizer

# The example conversation of OpenAI's cookbook "How to count tokens with tiktoken".
COOKBOOK_MESSAGES = [
    {
        "role": "system",
        "content": "You are a helpful, pattern-following assistant that translates corporate jargon into plain English.",
    },
    {
        "role": "system",
        "name": "example_user",
        "content": "New synergies will help drive top-line growth.",
    },
    {
        "role": "system",
        "name": "example_assistant",
        "content": "Things working well together will increase revenue.",
    },
    {
        "role": "system",
        "name": "example_user",
        "content": "Let's circle back when we have more bandwidth to touch base on opportunities for increased leverage.",
    },
    {
        "role": "system",
        "name": "example_assistant",
        "content": "Let's talk later when we're less busy about how to do better.",
    },
    {
        "role": "user",
        "content": "This late pivot means we don't have time to boil the ocean for the client deliverable.",
    },
]


def test_cookbook_example_counts() -> None:
    # Published in the cookbook: 129 prompt tokens for gpt-3.5-turbo and gpt-4, 124 for gpt-4o.
    assert count_messages(COOKBOOK_MESSAGES, TiktokenTokenizer("cl100k_base")) == 129
    assert count_messages(COOKBOOK_MESSAGES, TiktokenTokenizer("o200k_base")) == 124


def test_model_info_carries_the_framing() -> None:
    info = plugin.lamina_model_info("gpt-4o-2024-08-06", None)
    assert info is not None
    assert (info.name, info.encoding, info.provider) == ("gpt-4o", "o200k_base", "openai")
    assert (info.message_overhead, info.reply_overhead) == (4, 3)
    assert (info.context_window, info.max_output, info.min_cache_prefix) == (128_000, 16_384, 1024)
    legacy = plugin.lamina_model_info("gpt-4", None)
    assert legacy is not None and legacy.encoding == "cl100k_base"
    assert legacy.context_window == 8192


def test_kernel_budget_equals_the_cookbook_count_of_the_payload() -> None:
    """With this plugin's model info the kernel's budget total is exactly what the cookbook
    method counts for the request the adapter sends (no names, so no name tokens)."""
    history = [
        Block.text("t1u", "session", COOKBOOK_MESSAGES[1]["content"], role="user", group="t1"),
        Block.text("t1a", "session", COOKBOOK_MESSAGES[2]["content"], role="assistant", group="t1"),
        Block.text("t2u", "session", COOKBOOK_MESSAGES[3]["content"], role="user", group="t2"),
        Block.text("t2a", "session", COOKBOOK_MESSAGES[4]["content"], role="assistant", group="t2"),
    ]
    for model, encoding in (("gpt-4o", "o200k_base"), ("gpt-4", "cl100k_base")):
        assembler = make_assembler(
            {
                "model": model,
                "budget": {"reserve_response": 100, "reserve_tools": 0},
                "blocks": [{"id": "rules", "text": COOKBOOK_MESSAGES[0]["content"]}],
            },
            plugins=[("openai", plugin), ("turns", StaticProvider(history))],
        )
        context = assembler.assemble(assembler.request(COOKBOOK_MESSAGES[5]["content"]))
        payload = assembler.payload(context, "openai")
        assert [m["role"] for m in payload["messages"]] == [
            "system",
            "user",
            "assistant",
            "user",
            "assistant",
            "user",
        ]
        expected = count_messages(payload["messages"], TiktokenTokenizer(encoding))
        assert context.token_budget.used.total == expected
        # Tool definitions: the kernel's budget counts them the cookbook's way too.
        with_tools = assembler.assemble(
            assembler.request(COOKBOOK_MESSAGES[5]["content"], tools=(WEATHER,))
        )
        assert with_tools.token_budget.used.total == expected + count_tools(
            [WEATHER], TiktokenTokenizer(encoding)
        )
        assert with_tools.report.stable_prefix.sha256 != context.report.stable_prefix.sha256


WEATHER = Tool(
    name="get_current_weather",
    description="Get the current weather in a given location.",
    input_schema={
        "type": "object",
        "properties": {
            "location": {"type": "string", "description": "The city and state."},
            "format": {"type": "string", "enum": ["celsius", "fahrenheit"]},
        },
    },
)


def test_tool_definition_tokens() -> None:
    tool = Tool(
        name="get_current_weather",
        description="Get the current weather in a given location.",
        input_schema={
            "type": "object",
            "properties": {
                "location": {
                    "type": "string",
                    "description": "The city and state, e.g. San Francisco, CA.",
                },
                "format": {
                    "type": "string",
                    "enum": ["celsius", "fahrenheit"],
                    "description": "The unit.",
                },
            },
        },
    )
    tok = TiktokenTokenizer("o200k_base")
    # by hand, following the cookbook: function start 7 + "name:description" (final period
    # dropped), properties start 3, per property 3 + "key:type:description", enum start -3
    # and 3 + tokens per item, end 12
    expected = (
        7
        + tok.count("get_current_weather:Get the current weather in a given location")
        + 3
        + 3
        + tok.count("location:string:The city and state, e.g. San Francisco, CA")
        + 3
        + (-3 + 3 + tok.count("celsius") + 3 + tok.count("fahrenheit"))
        + tok.count("format:string:The unit")
        + 12
    )
    assert count_tools([tool], tok) == expected
    assert count_tools([], tok) == 0
    legacy = TiktokenTokenizer("cl100k_base")
    assert count_tools([tool], legacy) - count_tools([tool], tok) == 3 + (
        legacy.count("get_current_weather:Get the current weather in a given location")
        - tok.count("get_current_weather:Get the current weather in a given location")
        + legacy.count("location:string:The city and state, e.g. San Francisco, CA")
        - tok.count("location:string:The city and state, e.g. San Francisco, CA")
        + legacy.count("celsius")
        - tok.count("celsius")
        + legacy.count("fahrenheit")
        - tok.count("fahrenheit")
        + legacy.count("format:string:The unit")
        - tok.count("format:string:The unit")
    )

"""``lamina assemble --provider openai[-responses] --format payload`` through the command line."""

from __future__ import annotations

import pytest

from lamina.testing.adapters import payload_from_cli

EVENT = "Current time: 2026-01-02T03:04:05+00:00\nTimezone: UTC\n\nHi"


@pytest.mark.parametrize(
    ("provider", "expected"),
    [
        (
            "openai",
            {
                "model": "o3-2025-04-16",
                "messages": [
                    {"role": "developer", "content": "Be brief."},
                    {"role": "user", "content": EVENT},
                ],
                "max_completion_tokens": 500,
                "prompt_cache_key": "team-chat",
            },
        ),
        (
            "openai-responses",
            {
                "model": "o3-2025-04-16",
                "instructions": "Be brief.",
                "input": [
                    {
                        "type": "message",
                        "role": "user",
                        "content": [{"type": "input_text", "text": EVENT}],
                    }
                ],
                "max_output_tokens": 500,
                "prompt_cache_key": "team-chat",
            },
        ),
    ],
)
def test_cli_prints_the_request(tmp_path, provider: str, expected: dict) -> None:
    (tmp_path / "lamina.toml").write_text(
        'model = "o3-2025-04-16"\nsession = "team-chat"\n'
        '[[blocks]]\nid = "rules"\ntext = "Be brief."\n'
        "[budget]\nreserve_response = 500\n"
    )
    payload = payload_from_cli(
        str(tmp_path / "lamina.toml"), "Hi", plugins="openai", provider=provider
    )
    assert payload == expected


def test_model_overrides_in_config_reach_the_budget(tmp_path):
    from lamina import Assembler

    config = tmp_path / "lamina.toml"
    config.write_text(
        'model = "gpt-4o"\n[plugins.openai.models."gpt-4o"]\ncontext_window = 50000\n'
    )
    a = Assembler.from_config(config)
    budget = a.assemble(a.request("hi")).token_budget
    assert budget.model_limit == 50_000

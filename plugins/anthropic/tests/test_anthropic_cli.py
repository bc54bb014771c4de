"""``lamina assemble --provider anthropic --format payload`` through the command line."""

from __future__ import annotations

from lamina.testing.adapters import payload_from_cli


def test_cli_prints_the_messages_request(tmp_path) -> None:
    (tmp_path / "lamina.toml").write_text(
        'model = "claude-sonnet-4-20250514"\n'
        '[[blocks]]\nid = "rules"\ntext = "Answer in French."\n'
        "[budget]\nreserve_response = 1000\n"
        '[plugins.anthropic]\ncache_ttl = "1h"\n'
    )
    payload = payload_from_cli(str(tmp_path / "lamina.toml"), "Bonjour", plugins="anthropic")
    assert payload == {
        "model": "claude-sonnet-4-20250514",
        "max_tokens": 1000,
        "system": [{"type": "text", "text": "Answer in French."}],
        "messages": [
            {
                "role": "user",
                "content": [
                    {
                        "type": "text",
                        "text": "Current time: 2026-01-02T03:04:05+00:00\nTimezone: UTC\n\nBonjour",
                    }
                ],
            }
        ],
    }


def test_model_overrides_in_config_reach_the_budget(tmp_path):
    from lamina import Assembler

    config = tmp_path / "lamina.toml"
    config.write_text(
        'model = "claude-sonnet-4-20250514"\n'
        '[plugins.anthropic.models."claude-sonnet-4"]\ncontext_window = 1000000\n'
    )
    a = Assembler.from_config(config)
    assert a.assemble(a.request("hi")).token_budget.model_limit == 1_000_000

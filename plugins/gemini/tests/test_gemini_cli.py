"""``lamina assemble --provider gemini --format payload`` through the command line."""

from __future__ import annotations

from lamina.testing.adapters import payload_from_cli


def test_cli_prints_the_generate_content_body(tmp_path) -> None:
    (tmp_path / "lamina.toml").write_text(
        'model = "gemini-2.5-flash"\n[[blocks]]\nid = "rules"\ntext = "Cite sources."\n'
    )
    payload = payload_from_cli(str(tmp_path / "lamina.toml"), "Why?", plugins="gemini")
    assert payload == {
        "systemInstruction": {"parts": [{"text": "Cite sources."}]},
        "contents": [
            {
                "role": "user",
                "parts": [
                    {"text": "Current time: 2026-01-02T03:04:05+00:00\nTimezone: UTC\n\nWhy?"}
                ],
            }
        ],
        # the kernel's default reply reserve (4096 tokens)
        "generationConfig": {"maxOutputTokens": 4096},
    }

"""``lamina assemble --provider ollama --format payload`` through the command line."""

from __future__ import annotations

from lamina.testing.adapters import payload_from_cli


def test_cli_prints_the_chat_request(tmp_path) -> None:
    (tmp_path / "lamina.toml").write_text(
        'model = "llama3.2:3b"\n[[blocks]]\nid = "rules"\ntext = "Be kind."\n'
        "[budget]\ncontext_window = 16384\nreserve_response = 1024\nreserve_tools = 0\n"
        '[plugins.ollama]\nkeep_alive = "30m"\n'
    )
    payload = payload_from_cli(str(tmp_path / "lamina.toml"), "Hello", plugins="ollama")
    assert payload == {
        "model": "llama3.2:3b",
        "messages": [
            {"role": "system", "content": "Be kind."},
            {
                "role": "user",
                "content": "Current time: 2026-01-02T03:04:05+00:00\nTimezone: UTC\n\nHello",
            },
        ],
        "stream": False,
        "options": {"num_ctx": 16384, "num_predict": 1024},
        "keep_alive": "30m",
    }

"""``lamina assemble --provider ollama --format payload`` through the command line."""

from __future__ import annotations

import json
import os
import subprocess
import sys


def test_cli_prints_the_chat_request(tmp_path) -> None:
    (tmp_path / "lamina.toml").write_text(
        'model = "llama3.2:3b"\n[[blocks]]\nid = "rules"\ntext = "Be kind."\n'
        "[budget]\ncontext_window = 16384\nreserve_response = 1024\nreserve_tools = 0\n"
        '[plugins.ollama]\nkeep_alive = "30m"\n'
    )
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "lamina",
            "assemble",
            "--config",
            str(tmp_path / "lamina.toml"),
            "--message",
            "Hello",
            "--time",
            "2026-01-02T03:04:05Z",
            "--format",
            "payload",
        ],
        capture_output=True,
        text=True,
        env={**os.environ, "LAMINA_PLUGINS": "ollama"},
    )
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == {
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

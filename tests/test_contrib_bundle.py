"""Outside authors' path, for real: a fresh virtual environment gets the kernel, the contrib
bundle and a plugin copied from the template by ``pip install``; ``lamina plugins`` lists
both, and each package's own test suite passes there."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def new_plugin():
    """``scripts/new_plugin.py``, loaded from its file (``scripts/`` is not a package)."""
    spec = importlib.util.spec_from_file_location("new_plugin", ROOT / "scripts" / "new_plugin.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def run(args, cwd, **kwargs):
    """Run a command in a clean environment (no variables of the dev venv); fail with its output."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("VIRTUAL_ENV", "PYTHONPATH", "LAMINA_PLUGINS")
    }
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    proc = subprocess.run(
        args, cwd=cwd, env=env, capture_output=True, text=True, timeout=600, **kwargs
    )
    assert proc.returncode == 0, f"{args} exited {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout


@pytest.fixture(scope="module")
def outside(tmp_path_factory, new_plugin):
    """A fresh venv with ./core, ./contrib/redaction[test] and a template copy installed."""
    base = tmp_path_factory.mktemp("outside")
    plugin = base / "lamina-pinned-notes"
    new_plugin.copy_template("pinned_notes", plugin)
    env_dir = base / "venv"
    venv.create(env_dir, with_pip=True)
    python = env_dir / "bin" / "python"
    run(
        [
            python,
            "-m",
            "pip",
            "install",
            "--quiet",
            str(ROOT / "core"),
            f"{ROOT / 'contrib' / 'redaction'}[test]",
            f"{plugin}[test]",
        ],
        cwd=base,
    )
    (base / "pytest.ini").write_text(
        "[pytest]\naddopts = -p no:cacheprovider --import-mode=importlib\n"
        "filterwarnings = error::lamina.errors.LaminaWarning:lamina.*\n"
    )
    return base, env_dir, plugin


def test_fresh_venv_lists_the_bundle_and_the_new_plugin(outside):
    base, env_dir, _ = outside
    listing = run([env_dir / "bin" / "lamina", "plugins"], cwd=base)
    assert "redaction 0.1.0 (lamina-redaction, installed)\n" in listing
    assert "    hooks: lamina_block_transforms, lamina_settings_class\n" in listing
    assert "pinned_notes 0.1.0 (lamina-pinned-notes, installed)\n" in listing
    assert "ERROR" not in listing


def test_bundle_masks_through_the_cli(outside):
    base, env_dir, _ = outside
    work = base / "work"
    work.mkdir()
    (work / "lamina.toml").write_text(
        '[[blocks]]\nid = "ops"\nlayer = "workspace"\ntext = "DB_PASSWORD=hunter22"\n'
        "trusted = true\n\n[plugins.redaction]\n"
    )
    out = run([env_dir / "bin" / "lamina", "assemble", "-m", "hi", "--format", "text"], cwd=work)
    assert "DB_PASSWORD=[REDACTED:credential]" in out and "hunter22" not in out


def test_bundle_tests_pass_in_the_fresh_venv(outside):
    base, env_dir, _ = outside
    out = run(
        [
            env_dir / "bin" / "python",
            "-m",
            "pytest",
            "-q",
            "-c",
            base / "pytest.ini",
            "--rootdir",
            base,
            ROOT / "contrib" / "redaction" / "tests",
        ],
        cwd=base,
    )
    assert " passed" in out and "failed" not in out


def test_template_copy_is_a_working_plugin(outside):
    _, env_dir, plugin = outside
    assert (plugin / "src" / "lamina_pinned_notes" / "plugin.py").is_file()
    assert 'pinned_notes = "lamina_pinned_notes.plugin"' in (plugin / "pyproject.toml").read_text()
    assert not list(plugin.rglob("*myplugin*"))
    out = run([env_dir / "bin" / "python", "-m", "pytest", "-q"], cwd=plugin)
    assert " passed" in out and "failed" not in out


def test_copy_refuses_bad_names_and_existing_folders(tmp_path, new_plugin):
    with pytest.raises(ValueError, match="lowercase"):
        new_plugin.copy_template("Bad-Name", tmp_path / "x")
    (tmp_path / "taken").mkdir()
    with pytest.raises(FileExistsError):
        new_plugin.copy_template("ok", tmp_path / "taken")


def test_copy_command_line(tmp_path):
    out = run(
        [sys.executable, ROOT / "scripts" / "new_plugin.py", "notes", tmp_path / "n"], cwd=tmp_path
    )
    assert out.startswith(f"created {tmp_path / 'n'} (7 files)")
    text = (tmp_path / "n" / "tests" / "test_notes_plugin.py").read_text()
    assert 'plugin_name = "notes"' in text and "import lamina_notes.plugin as notes" in text

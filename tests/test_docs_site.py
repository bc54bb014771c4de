"""The documentation site builds offline with ``mkdocs build --strict`` (every page in the
nav, every link resolving), has a reference page for every plugin and bundle, and the
tutorial runs as written, printing what it shows."""

from __future__ import annotations

import contextlib
import importlib.util
import io
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TUTORIAL = ROOT / "docs" / "tutorial.md"


def packages():
    for folder in ("plugins", "contrib"):
        for pyproject in sorted((ROOT / folder).glob("*/pyproject.toml")):
            if pyproject.parent.name != "plugin-template":
                yield folder, pyproject.parent


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    out = tmp_path_factory.mktemp("site")
    proc = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, f"mkdocs build --strict failed:\n{proc.stdout}\n{proc.stderr}"
    return out


def test_site_has_the_pages(site):
    for page in (
        "concepts",
        "tutorial",
        "configuration",
        "plugins",
        "authors",
        "hooks",
        "versioning",
        "benchmarks",
    ):
        assert (site / page / "index.html").is_file(), page
    assert (site / "index.html").is_file()


def test_hook_reference_page_lists_every_hook(site):
    import lamina.hookspecs

    html = (site / "hooks" / "index.html").read_text("utf-8")
    hooks = [n for n, f in vars(lamina.hookspecs).items() if hasattr(f, "lamina_spec")]
    assert hooks and all(f'id="{h}"' in html for h in hooks)


def test_every_plugin_and_bundle_has_a_reference_page(site):
    found = list(packages())
    assert any(folder == "contrib" for folder, _ in found)
    for folder, path in found:
        page = site / "reference" / folder / path.name / "index.html"
        assert page.is_file(), f"no reference page for {folder}/{path.name}"
        html = page.read_text("utf-8")
        if (path / "README.md").is_file():
            assert f"{folder}/{path.name}/README.md" in html
        else:
            name = tomllib.loads((path / "pyproject.toml").read_text())["project"]["name"]
            assert name in html and "has no README yet" in html


def test_bundle_page_is_its_readme(site):
    html = (site / "reference" / "contrib" / "redaction" / "index.html").read_text("utf-8")
    assert "Config reference" in html and "REDACTED:credential" in html


@pytest.fixture(scope="module")
def mkdocs_hooks():
    """``scripts/mkdocs_hooks.py``, loaded from its file (``scripts/`` is not a package)."""
    spec = importlib.util.spec_from_file_location(
        "mkdocs_hooks", ROOT / "scripts" / "mkdocs_hooks.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_page_generator_keeps_docs_links_and_flattens_others(mkdocs_hooks):
    probe = ROOT / "contrib" / "_docs_link_probe"
    probe.mkdir()
    try:
        (probe / "README.md").write_text(
            "See [concepts](../../docs/concepts.md#the-budget), [src](src/x.py) and [web](https://a.b)."
        )
        out = mkdocs_hooks.page("x", probe)
    finally:
        (probe / "README.md").unlink()
        probe.rmdir()
    assert out.startswith(
        "See [concepts](../concepts.md#the-budget), src (`contrib/_docs_link_probe/src/x.py`) "
        "and [web](https://a.b)."
    )


def test_authors_guide_fixture_example_passes(
    lamina_assembler, lamina_fake_model, lamina_fake_provider
):
    text = (ROOT / "docs" / "authors.md").read_text("utf-8")
    [code] = [
        m["code"] for m in CODE_BLOCK.finditer(text) if "def test_memory_is_kept" in m["code"]
    ]
    namespace: dict[str, object] = {}
    exec(compile(code, "authors.md", "exec"), namespace)
    namespace["test_memory_is_kept"](lamina_assembler, lamina_fake_model, lamina_fake_provider)


# -- the tutorial ------------------------------------------------------------------------------

FILE_BLOCK = re.compile(r"^`(?P<name>[^`\s]+)`[^\n]*:\n\n```\w*\n(?P<body>.*?)```", re.M | re.S)
CODE_BLOCK = re.compile(
    r"```python\n(?P<code>.*?)```(?:\n\nOutput:\n\n```text\n(?P<out>.*?)```)?", re.S
)


def test_tutorial_runs_as_written(tmp_path, monkeypatch):
    text = TUTORIAL.read_text("utf-8")
    files = {m["name"]: m["body"] for m in FILE_BLOCK.finditer(text)}
    assert set(files) == {"AGENTS.md", "sessions/support-42.jsonl", "lamina.toml", "transcript.py"}
    for name, body in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(body, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("LAMINA_PLUGINS", "redaction")  # what the tutorial installs
    monkeypatch.delitem(sys.modules, "transcript", raising=False)
    namespace: dict[str, object] = {}
    blocks = list(CODE_BLOCK.finditer(text))
    steps = [m for m in blocks if m["code"] != files["transcript.py"]]
    assert len(blocks) == 4 and len(steps) == 3, "transcript.py and three steps with output"
    for step in steps:
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            exec(compile(step["code"], str(TUTORIAL), "exec"), namespace)
        assert step["out"] is not None, "each step shows its output"
        assert out.getvalue() == step["out"], (
            f"the tutorial shows\n{step['out']}\nbut it prints\n{out.getvalue()}"
        )
    assert "wJalrXUtnFEMI" not in str(namespace["context"])

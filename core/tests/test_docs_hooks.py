"""docs/hooks.md is generated from the hook specs and must stay in step with them."""

from __future__ import annotations

import difflib
import importlib.util
import inspect
import re
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import lamina.hookspecs

ROOT = Path(__file__).resolve().parents[2]
GENERATOR = ROOT / "scripts" / "gen_hook_docs.py"
HOOKS_MD = ROOT / "docs" / "hooks.md"

# ``Example::`` on its own line, a blank line, then at least one indented line of code.
EXAMPLE = re.compile(r"^Example::\n\n(?: {4}\S.*\n?)", re.MULTILINE)
SIGNATURE_BLOCK = re.compile(r"```python\n(?P<sig>.*?)\n```", re.DOTALL)


def _load_generator() -> types.ModuleType:
    spec = importlib.util.spec_from_file_location("gen_hook_docs", GENERATOR)
    assert spec is not None and spec.loader is not None, f"cannot load {GENERATOR}"
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


gen = _load_generator()
SPECS: list[tuple[str, Callable[..., Any]]] = gen.hook_specs(lamina.hookspecs)
SPEC_IDS = [name for name, _ in SPECS]


def _documented_sections() -> dict[str, str]:
    """``## heading`` → the text up to the next ``## heading`` in docs/hooks.md."""
    assert HOOKS_MD.is_file(), "docs/hooks.md is missing: run python scripts/gen_hook_docs.py"
    sections: dict[str, str] = {}
    name: str | None = None
    for line in HOOKS_MD.read_text("utf-8").splitlines():
        if line.startswith("## "):
            name = line[3:].strip()
            sections[name] = ""
        elif name is not None:
            sections[name] += line + "\n"
    return sections


def test_generator_finds_every_hookspec() -> None:
    marked = {
        name
        for name, obj in vars(lamina.hookspecs).items()
        if inspect.isfunction(obj) and hasattr(obj, gen.SPEC_ATTR)
    }
    assert set(SPEC_IDS) == marked, "every @hookspec must be named lamina_* and vice versa"
    assert SPECS, "no hook specs found"


@pytest.mark.parametrize(("name", "fn"), SPECS, ids=SPEC_IDS)
def test_spec_has_docstring_with_example(name: str, fn: Callable[..., Any]) -> None:
    doc = inspect.cleandoc(fn.__doc__ or "")
    assert doc, f"hook spec {name} has no docstring"
    assert EXAMPLE.search(doc), (
        f"the docstring of hook spec {name} has no 'Example::' block "
        "(a line 'Example::', a blank line, then indented code)"
    )


@pytest.mark.parametrize(("name", "fn"), SPECS, ids=SPEC_IDS)
def test_spec_is_documented_with_its_signature(name: str, fn: Callable[..., Any]) -> None:
    sections = _documented_sections()
    assert name in sections, f"docs/hooks.md has no section for hook {name}"
    section = sections[name]
    match = SIGNATURE_BLOCK.search(section)
    assert match, f"docs/hooks.md: the section for {name} has no python signature block"
    expected = f"def {name}{inspect.signature(fn)}"
    assert match["sig"] == expected, (
        f"docs/hooks.md documents {name} as\n  {match['sig']}\nbut the spec is\n  {expected}"
    )
    firstresult = "yes" if fn.lamina_spec["firstresult"] else "no"  # type: ignore[attr-defined]
    assert f"**firstresult:** {firstresult}" in section, (
        f"docs/hooks.md: {name} should say firstresult {firstresult}"
    )


def test_no_documented_hook_is_stale() -> None:
    stale = sorted(set(_documented_sections()) - set(SPEC_IDS))
    assert not stale, f"docs/hooks.md documents hooks that no longer exist: {stale}"


def test_hooks_md_is_up_to_date() -> None:
    expected = gen.render(lamina.hookspecs)
    current = HOOKS_MD.read_text("utf-8") if HOOKS_MD.is_file() else ""
    if current != expected:
        diff = "".join(
            difflib.unified_diff(
                current.splitlines(keepends=True),
                expected.splitlines(keepends=True),
                fromfile="docs/hooks.md",
                tofile="generated",
            )
        )
        pytest.fail(f"docs/hooks.md is stale; run python scripts/gen_hook_docs.py\n{diff}")

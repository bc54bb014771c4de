"""Every plugin distribution as users install it (``plugins/`` and ``contrib/``; the plugin
template is built and checked by ``tests/test_contrib_bundle.py``):

- the kernel is its only Lamina dependency, and it registers one plugin, its own;
- it imports what it declares: at import time the standard library, ``lamina``, its own
  package and its dependencies; an extra's packages (a provider's SDK, a database driver)
  only inside functions, so ``pip install lamina-x`` without the extra still imports (a
  provider adapter's SDK is such an extra, ``sdk``);
- its tests import no other plugin;
- it ships its license, README, classifiers and type information.
"""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from collections.abc import Iterator
from importlib import metadata
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: Distributions (a requirement's name) that provide each importable top-level name.
PROVIDERS = metadata.packages_distributions()
#: Tests that guard imports made only by type checkers.
TYPE_CHECKING = {"TYPE_CHECKING", "typing.TYPE_CHECKING"}
#: The provider adapters' SDKs: optional (their ``sdk`` extra), needed only to send.
SDKS = {
    "lamina-anthropic": "anthropic",
    "lamina-gemini": "google-genai",
    "lamina-ollama": "ollama",
    "lamina-openai": "openai",
}


def projects() -> dict[str, Path]:
    """Every plugin distribution's name -> its project folder."""
    found = {}
    for pyproject in sorted(
        [*ROOT.glob("plugins/*/pyproject.toml"), *ROOT.glob("contrib/*/pyproject.toml")]
    ):
        if pyproject.parent.name != "plugin-template":
            project = tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]
            found[project["name"]] = pyproject.parent
    return found


PROJECTS = projects()


def _package(project: Path) -> Path:
    (package,) = (p for p in (project / "src").iterdir() if (p / "__init__.py").is_file())
    return package


def _name(requirement: str) -> str:
    return _canonical(re.split(r"[<>=!~;\[ ]", requirement, maxsplit=1)[0])


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _requirements(dist: str) -> dict[str | None, set[str]]:
    """Required distributions by extra (``None``: the dependencies themselves)."""
    out: dict[str | None, set[str]] = {None: set()}
    for requirement in metadata.requires(dist) or ():
        extra = re.search(r"""extra\s*==\s*["']([^"']+)["']""", requirement)
        out.setdefault(extra and extra.group(1), set()).add(_name(requirement))
    return out


def _imports(path: Path) -> Iterator[tuple[str, bool]]:
    """(top-level name, whether imported only when a function runs) of every absolute import
    in ``path``; imports under ``if TYPE_CHECKING:`` are not made at all."""

    def visit(node: ast.AST, lazy: bool) -> Iterator[tuple[str, bool]]:
        if isinstance(node, ast.If) and ast.unparse(node.test) in TYPE_CHECKING:
            yield from (x for child in node.orelse for x in visit(child, lazy))
            return
        if isinstance(node, ast.Import):
            yield from ((alias.name.split(".")[0], lazy) for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            yield node.module.split(".")[0], lazy
        inside = lazy or isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda)
        for child in ast.iter_child_nodes(node):
            yield from visit(child, inside)

    yield from visit(ast.parse(path.read_text(encoding="utf-8")), False)


@pytest.mark.parametrize("dist", sorted(PROJECTS))
def test_depends_on_the_kernel_and_registers_its_own_plugin_only(dist: str) -> None:
    needed = set().union(*_requirements(dist).values())
    assert "lamina" in _requirements(dist)[None]
    assert {d for d in needed if d.startswith("lamina-")} == set()
    package = _package(PROJECTS[dist]).name
    ours = [ep for ep in metadata.entry_points(group="lamina") if ep.dist and ep.dist.name == dist]
    assert len(ours) == 1 and ours[0].value.split(":")[0].split(".")[0] == package, ours


@pytest.mark.parametrize("dist", sorted(PROJECTS))
def test_imports_only_what_it_declares_and_extras_only_when_used(dist: str) -> None:
    package = _package(PROJECTS[dist])
    declared = _requirements(dist)
    extras = set().union(
        *(names for extra, names in declared.items() if extra not in (None, "test"))
    )
    own = {"lamina", package.name} | set(sys.stdlib_module_names)
    bad = []
    for path in sorted(package.rglob("*.py")):
        for name, lazy in _imports(path):
            if name in own:
                continue
            providers = {_canonical(d) for d in PROVIDERS.get(name, ())}
            where = path.relative_to(ROOT)
            if providers & declared[None]:
                continue
            if not providers & extras:
                bad.append(f"{where} imports {name}, which no dependency or extra provides")
            elif not lazy:
                bad.append(f"{where} imports {name} (an extra's) when it is imported")
    assert bad == []


@pytest.mark.parametrize("dist", sorted(SDKS))
def test_an_adapters_sdk_is_its_sdk_extra_not_a_dependency(dist: str) -> None:
    declared = _requirements(dist)
    assert SDKS[dist] in declared["sdk"] and SDKS[dist] not in declared[None]


@pytest.mark.parametrize("dist", sorted(PROJECTS))
def test_its_tests_import_no_other_plugin(dist: str) -> None:
    own = _package(PROJECTS[dist]).name
    plugins = {_package(project).name for project in PROJECTS.values()} - {own}
    bad = [
        f"{path.relative_to(ROOT)} imports {name}"
        for path in sorted((PROJECTS[dist] / "tests").rglob("*.py"))
        for name, _ in _imports(path)
        if name in plugins
    ]
    assert bad == []


@pytest.mark.parametrize("dist", sorted(PROJECTS))
def test_ships_license_readme_classifiers_and_types(dist: str) -> None:
    project, meta = PROJECTS[dist], metadata.metadata(dist)
    assert meta["License-Expression"] == "MIT"
    assert (project / "LICENSE").read_text(encoding="utf-8").startswith("MIT License")
    assert (project / "README.md").is_file() and meta["Description-Content-Type"] == "text/markdown"
    assert {"Typing :: Typed", "Development Status :: 3 - Alpha"} <= set(
        meta.get_all("Classifier") or ()
    )
    urls = dict(u.split(", ", 1) for u in meta.get_all("Project-URL") or ())
    assert urls["Homepage"] == "https://github.com/lamina-dev/lamina"
    assert (_package(project) / "py.typed").is_file()

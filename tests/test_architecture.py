"""The layout the architecture promises, checked from the source's imports:

- no import cycles inside any package (module-level imports, ``TYPE_CHECKING`` aside);
- a plugin imports only the kernel's public API (``lamina``, ``lamina.adapters``,
  ``lamina.testing``) and never another plugin;
- kernel modules stay small (about 400 lines at most).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PUBLIC_KERNEL = ("lamina", "lamina.adapters", "lamina.testing")
MAX_KERNEL_LINES = 420


def packages() -> dict[str, Path]:
    """Every distribution's import package: name -> folder."""
    found = {"lamina": ROOT / "core" / "src" / "lamina"}
    for src in sorted([*ROOT.glob("plugins/*/src"), *ROOT.glob("contrib/*/src")]):
        for pkg in src.iterdir():
            if (pkg / "__init__.py").exists():
                found[pkg.name] = pkg
    return found


def modules(name: str, folder: Path) -> dict[str, Path]:
    out = {}
    for path in sorted(folder.rglob("*.py")):
        parts = path.relative_to(folder).with_suffix("").parts
        dotted = ".".join((name, *parts))
        out[dotted.removesuffix(".__init__")] = path
    return out


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def module_imports(path: Path, dotted: str) -> set[str]:
    """Modules imported when ``path`` is imported (not inside functions or TYPE_CHECKING)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = dotted if path.name == "__init__.py" else dotted.rpartition(".")[0]
    found: set[str] = set()

    def visit(body: list[ast.stmt]) -> None:
        for node in body:
            if isinstance(node, ast.Import):
                found.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")
                    anchor = anchor[: len(anchor) - node.level + 1]
                    base = ".".join([*anchor, base] if base else anchor)
                for alias in node.names:
                    # ``from pkg import sub`` imports the submodule; ``from pkg import name``
                    # runs pkg's __init__ for a name it defines.
                    sub = f"{base}.{alias.name}"
                    found.add(sub if _is_module(sub) else base)
            elif isinstance(node, ast.If) and not _is_type_checking(node.test):
                visit(node.body)
                visit(node.orelse)
            elif isinstance(node, ast.Try):
                visit(node.body)
                for handler in node.handlers:
                    visit(handler.body)

    visit(tree.body)
    return found


def _is_module(dotted: str) -> bool:
    top, _, rest = dotted.partition(".")
    folder = PACKAGES.get(top)
    if folder is None:
        return False
    path = folder.joinpath(*rest.split(".")) if rest else folder
    return path.with_suffix(".py").exists() or (path / "__init__.py").exists()


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def connect(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in graph:
        if v not in index:
            connect(v)
    return out


PACKAGES = packages()


@pytest.mark.parametrize("name", sorted(PACKAGES))
def test_no_import_cycles(name):
    mods = modules(name, PACKAGES[name])
    graph = {m: {i for i in module_imports(p, m) if i in mods and i != m} for m, p in mods.items()}
    # A package's __init__ importing its own modules is how re-exports work; a module
    # importing its package's __init__ back is a cycle only if the __init__ reaches it.
    assert cycles(graph) == []


@pytest.mark.parametrize("name", sorted(n for n in PACKAGES if n != "lamina"))
def test_plugins_use_only_the_public_kernel_api_and_no_other_plugin(name):
    others = set(PACKAGES) - {name, "lamina"}
    bad = []
    for dotted, path in modules(name, PACKAGES[name]).items():
        for imported in module_imports(path, dotted) | _function_imports(path):
            top = imported.split(".")[0]
            if top in others:
                bad.append(f"{dotted} imports {imported} (another plugin)")
            elif top == "lamina" and not _public(imported):
                bad.append(f"{dotted} imports {imported} (kernel internals)")
    assert bad == []


def _public(imported: str) -> bool:
    # ``from lamina import X`` shows up as "lamina.X": public unless X is a kernel module.
    if imported.count(".") == 1 and imported.startswith("lamina.") and not _is_module(imported):
        return True
    return any(imported == p or imported.startswith(p + ".") for p in PUBLIC_KERNEL)


def _function_imports(path: Path) -> set[str]:
    """Every import anywhere in the file, also inside functions (for the public-API rule)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.add(node.module)
            found.update(f"{node.module}.{a.name}" for a in node.names)
    return found


def test_kernel_modules_stay_small():
    big = {
        str(p.relative_to(ROOT)): n
        for p in PACKAGES["lamina"].rglob("*.py")
        if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_KERNEL_LINES
    }
    assert big == {}


def test_the_lazy_public_api_matches_its_typed_imports():
    """``lamina`` loads its names on first use; the table it loads from and the imports type
    checkers read must name the same things from the same modules, and each must load."""
    import lamina

    init = PACKAGES["lamina"] / "__init__.py"
    typed = {}
    for node in ast.walk(ast.parse(init.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("lamina."):
            typed.update({alias.name: node.module for alias in node.names})
    assert typed == lamina._EXPORTS
    assert sorted(lamina.__all__) == sorted(typed)
    for name in lamina.__all__:
        assert getattr(lamina, name) is not None

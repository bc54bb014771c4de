"""The console script's cache of generated code (``lamina._compiled``): what it gives back is
what ``compile`` gives, for attrs' and cattrs' methods whatever their per-process type hash;
a damaged or unwritable cache changes nothing but the time; library callers never get it."""

from __future__ import annotations

import builtins
import marshal
import os
import random
import re
import subprocess
import sys
from pathlib import Path
from types import CodeType
from typing import Any

import attrs
import pytest

from lamina import _compiled
from lamina._compiled import CompileCache, cache_file


def shape(code: CodeType) -> tuple[Any, ...]:
    """Everything a code object does: its bytecode, constants (nested code by shape), names,
    flags and line numbers; not the columns of its instructions."""
    consts = tuple(shape(c) if isinstance(c, CodeType) else (type(c), c) for c in code.co_consts)
    return (
        code.co_code,
        consts,
        code.co_names,
        code.co_varnames,
        code.co_freevars,
        code.co_cellvars,
        code.co_flags,
        code.co_argcount,
        code.co_kwonlyargcount,
        code.co_posonlyargcount,
        code.co_stacksize,
        code.co_qualname,
        code.co_filename,
        code.co_firstlineno,
        code.co_exceptiontable,
        tuple(code.co_lines()),
    )


def generated_sources(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str, int]]:
    """The (source, file name, flags) attrs compiles for a few classes of every kind: frozen
    and hashable, without fields, with defaults, validators and slots."""
    seen: list[tuple[str, str, int]] = []
    real = builtins.compile

    def record(source, filename, mode, flags=0, dont_inherit=False, *args, **kwargs):
        if not dont_inherit:
            flags |= sys._getframe(1).f_code.co_flags & _compiled.FUTURE_FLAGS
        if isinstance(source, str) and mode == "exec":
            seen.append((source, filename, flags))
        return real(source, filename, mode, flags, True, *args, **kwargs)

    monkeypatch.setattr(builtins, "compile", record)

    @attrs.frozen(kw_only=True)
    class Point:
        x: int
        y: int = 0
        label: str = attrs.field(default="", validator=attrs.validators.instance_of(str))

    @attrs.frozen
    class Empty:
        pass

    @attrs.define
    class Mutable:
        items: list[int] = attrs.Factory(list)

    monkeypatch.setattr(builtins, "compile", real)
    assert any("hash((" in s for s, _, _ in seen) and len(seen) >= 3
    return seen


def other_type_hash(source: str) -> str:
    """``source`` as another process would write it: another hash of the class's name."""
    number = random.Random(source).randrange(-(2**63), 2**63)
    return re.sub(r"(hash\(\(\n *)(-?\d+)(,\n)", lambda m: f"{m[1]}{number}{m[3]}", source)


def test_code_read_back_is_what_compile_gives_for_any_type_hash(tmp_path, monkeypatch):
    sources = generated_sources(monkeypatch)
    first = CompileCache(tmp_path / "code.marshal")
    for source, filename, flags in sources:
        got = first.compile(source, filename, "exec", flags, True)
        want = compile(source, filename, "exec", flags, True)
        assert marshal.dumps(got) == marshal.dumps(want)  # a miss: compile's own code
    assert (first.hits, first.misses) == (0, len(sources))
    first.save()

    again = CompileCache(tmp_path / "code.marshal")
    for source, filename, flags in sources:
        assert marshal.dumps(again.compile(source, filename, "exec", flags, True)) == (
            marshal.dumps(compile(source, filename, "exec", flags, True))
        )
        other = other_type_hash(source)
        got = again.compile(other, filename, "exec", flags, True)
        assert shape(got) == shape(compile(other, filename, "exec", flags, True))
    assert again.misses == 0 and again.hits == 2 * len(sources)


def test_inherited_future_flags_are_part_of_the_code(tmp_path):
    """Called without ``dont_inherit``, the cache compiles with its caller's ``__future__``
    flags as the builtin does (this module has ``from __future__ import annotations``)."""
    cache = CompileCache(tmp_path / "code.marshal")
    source = "def f(x: Undefined) -> None:\n    pass\n"
    code = cache.compile(source, "<generated f>", "exec")
    assert code.co_flags & 0x1000000  # CO_FUTURE_ANNOTATIONS
    namespace: dict[str, Any] = {}
    exec(code, namespace)  # the annotation is a string: no NameError
    assert namespace["f"].__annotations__["x"] == "Undefined"


def test_other_compilations_pass_through(tmp_path):
    cache = CompileCache(tmp_path / "code.marshal")
    assert eval(cache.compile("1 + 2", "<expr>", "eval")) == 3
    assert cache.compile("x = 1", "module.py", "exec").co_filename == "module.py"
    assert (cache.hits, cache.misses, cache.used) == (0, 0, {})
    cache.save()
    assert not (tmp_path / "code.marshal").exists()


def test_a_changed_source_under_the_same_name_is_compiled_again(tmp_path):
    path = tmp_path / "code.marshal"
    first = CompileCache(path)
    first.compile("def f():\n    return 1\n", "<generated f>", "exec")
    first.save()
    second = CompileCache(path)
    code = second.compile("def f():\n    return 2\n", "<generated f>", "exec")
    namespace: dict[str, Any] = {}
    exec(code, namespace)
    assert namespace["f"]() == 2 and second.misses == 1


HASHED = """\
def __hash__(self):
        return hash((
                {number},
                self.x,
            ))
LIMIT = {other}
"""


def test_a_type_hash_shared_with_another_constant_is_never_replaced(tmp_path):
    """When the stored number is also another constant of the code (the compiler shares
    one), another number cannot be put in its place: the source is compiled."""
    path = tmp_path / "code.marshal"
    first = CompileCache(path)
    first.compile(HASHED.format(number=5, other=5), "<generated C>", "exec")
    first.save()
    second = CompileCache(path)
    code = second.compile(HASHED.format(number=6, other=5), "<generated C>", "exec")
    assert second.misses == 1
    namespace: dict[str, Any] = {}
    exec(code, namespace)
    assert namespace["LIMIT"] == 5 and 6 in namespace["__hash__"].__code__.co_consts


def test_the_type_hash_is_put_where_it_was(tmp_path):
    path = tmp_path / "code.marshal"
    first = CompileCache(path)
    first.compile(HASHED.format(number=-17, other=5), "<generated C>", "exec")
    first.save()
    (entry,) = marshal.loads(path.read_bytes()).values()
    assert entry[1] == -17 and entry[2] is not None
    second = CompileCache(path)
    code = second.compile(HASHED.format(number=123456789, other=5), "<generated C>", "exec")
    assert second.hits == 1
    namespace: dict[str, Any] = {}
    exec(code, namespace)

    class C:
        x = 3

    assert namespace["__hash__"](C()) == hash((123456789, 3)) and namespace["LIMIT"] == 5


def test_a_damaged_place_is_compiled_again(tmp_path):
    path = tmp_path / "code.marshal"
    first = CompileCache(path)
    first.compile(HASHED.format(number=-17, other=5), "<generated C>", "exec")
    first.save()
    ((key, (code, number, _)),) = marshal.loads(path.read_bytes()).items()
    for where in [(99,), (0, 0, 0, 0), ()]:
        path.write_bytes(marshal.dumps({key: (code, number, where)}))
        again = CompileCache(path)
        got = again.compile(HASHED.format(number=8, other=5), "<generated C>", "exec")
        assert again.misses == 1 and 8 in got.co_consts[0].co_consts


@pytest.mark.parametrize("damage", [b"", b"not marshal", marshal.dumps([1, 2]), b"\xff" * 64])
def test_a_damaged_cache_is_ignored_and_written_again(tmp_path, damage):
    path = tmp_path / "code.marshal"
    path.write_bytes(damage)
    cache = CompileCache(path)
    code = cache.compile("def f():\n    return 3\n", "<generated f>", "exec")
    namespace: dict[str, Any] = {}
    exec(code, namespace)
    assert namespace["f"]() == 3 and cache.misses == 1
    cache.save()
    stored = marshal.loads(path.read_bytes())
    assert isinstance(stored, dict) and len(stored) == 1


@pytest.mark.parametrize(
    "entry",
    [
        ("not code", None),
        (b"not marshal", None, None),
        (marshal.dumps("not code"), None, None),
        (marshal.dumps(compile("pass", "<another name>", "exec")), None, None),
    ],
)
def test_a_stored_entry_of_the_wrong_kind_is_compiled_again(tmp_path, entry):
    path = tmp_path / "code.marshal"
    first = CompileCache(path)
    first.compile("def f():\n    return 4\n", "<generated f>", "exec")
    first.save()
    (key,) = marshal.loads(path.read_bytes())
    path.write_bytes(marshal.dumps({key: entry}))
    second = CompileCache(path)
    code = second.compile("def f():\n    return 4\n", "<generated f>", "exec")
    assert isinstance(code, CodeType) and second.misses == 1


def test_a_cache_that_cannot_be_written_changes_nothing(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("a file where the cache folder would be")
    cache = CompileCache(blocker / "code" / "code.marshal")
    code = cache.compile("def f():\n    return 5\n", "<generated f>", "exec")
    cache.save()  # no error
    namespace: dict[str, Any] = {}
    exec(code, namespace)
    assert namespace["f"]() == 5


PROBE = (
    "import atexit, builtins, sys\n"
    "from lamina import cli\n"
    "how, sys.argv = sys.argv[1], ['lamina', *sys.argv[2:]]\n"
    "def report():\n"
    "    cache = getattr(builtins.compile, '__self__', None)\n"
    "    cache = cache if hasattr(cache, 'misses') else None\n"
    "    print('CACHE', None if cache is None else (cache.hits > 0, cache.misses), file=sys.stderr)\n"
    "atexit.register(report)\n"
    "cli.main() if how == 'main' else cli.run()\n"
)


def _lamina(how: str, cache: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "LAMINA_PLUGINS": "", "LAMINA_CACHE_DIR": cache}
    args = ["assemble", "--model", "gpt-4o", "--format", "json", "--message", "hello"]
    args += ["--time", "2026-03-01T09:00:00+00:00"]
    return subprocess.run(
        [sys.executable, "-c", PROBE, how, *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        cwd=tmp_path,
    )


def _without_timings(text: str) -> str:
    return re.sub(r'"(plan|gather|place|measure|fit|format|report)": [0-9.]+', "", text)


def test_the_console_script_compiles_once_and_prints_the_same(tmp_path):
    cache = str(tmp_path / "cache")
    cold = _lamina("run", cache, tmp_path)
    warm = _lamina("run", cache, tmp_path)
    off = _lamina("run", "", tmp_path)
    library = _lamina("main", cache, tmp_path)
    for done in (cold, warm, off, library):
        assert done.returncode == 0, done.stderr
    assert "CACHE (False," in cold.stderr and "CACHE (True, 0)" in warm.stderr, (
        cold.stderr + warm.stderr
    )
    assert "CACHE None" in off.stderr and "CACHE None" in library.stderr
    outputs = {_without_timings(d.stdout) for d in (cold, warm, off, library)}
    assert len(outputs) == 1
    assert [p.name for p in (tmp_path / "cache" / "code").iterdir()] == [
        cache_file(Path(cache)).name
    ]


def test_a_compilation_while_the_cache_loads_compiles(tmp_path, monkeypatch):
    """Loading imports Lamina's cache folder's module; were a class made there, its
    compilation would come back into the cache while it loads: it is compiled."""
    cache = CompileCache(tmp_path / "code.marshal")
    real = cache._load
    inner: list[CodeType] = []

    def load() -> dict[bytes, Any]:
        inner.append(cache.compile("def g():\n    return 1\n", "<generated g>", "exec"))
        return real()

    monkeypatch.setattr(cache, "_load", load)
    code = cache.compile("def f():\n    return 2\n", "<generated f>", "exec")
    assert isinstance(code, CodeType) and len(inner) == 1 and cache.misses == 2

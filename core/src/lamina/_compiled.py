"""Generated code compiled once, for the ``lamina`` command.

attrs writes each class's methods (``__init__``, ``__eq__``, ``__repr__``, …) as Python
source and compiles it when the class is made; cattrs does the same for its structuring
functions. ``lamina assemble`` makes about 170 such classes and 40 functions, and the
compilations took about 50 ms of a 220 ms start. In the command's process (``lamina.cli.run``
calls ``install``), ``compile`` keeps what it compiles from generated source (a file name
in angle brackets, ``mode="exec"``, no other flags) in Lamina's cache directory, the way
Python keeps a module's bytecode in ``__pycache__``: marshalled code objects (each unmarshalled
only when used), each under the sha256 of its source, file name, inherited ``__future__``
flags and optimization level, in a file named by the interpreter's bytecode version. The same
source gives the same code object whether compiled or read back; other source (a changed
class, another attrs) is another key. One number differs in every process: attrs'
``__hash__`` starts with a hash of the class's name (string hashing is randomized), so that
number is keyed as 0 and put into the code read back in the place the stored one has among
the constants (kept only when it has exactly one), which gives compile's code but for the
column where that literal ends. A damaged or unreadable file is ignored and written again; a
cache directory that cannot be written leaves every compilation as it was. Like
``__pycache__``, the folder is trusted: it is the user's own.

Library callers (``lamina.cli.main``, hosts, tests) never get this: only the console script.
"""

from __future__ import annotations
import __future__ as _future

import builtins
import re
import sys
from types import CodeType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pathlib import Path

#: The flags ``compile`` inherits from its caller: every ``__future__`` feature's but
#: ``nested_scopes`` (``CO_NESTED``, set on every nested function, is not inherited).
FUTURE_FLAGS = 0
for _name in _future.all_feature_names:
    FUTURE_FLAGS |= getattr(_future, _name).compiler_flag
FUTURE_FLAGS &= ~_future.nested_scopes.compiler_flag
#: More entries than this (about 3 kB each) and the file is written with only the last run's.
MAX_ENTRIES = 1000

_builtin_compile = builtins.compile


def cache_file(root: Path) -> Path:
    """The file under the cache directory ``root`` for this interpreter's bytecode."""
    tag = sys.implementation.cache_tag or sys.implementation.name
    return root / "code" / f"{tag}-{sys.hexversion:x}-O{sys.flags.optimize}.marshal"


class CompileCache:
    """Code objects compiled from generated source, read from and written to ``path``."""

    def __init__(self, path: Path | None = None) -> None:
        #: ``None``: ``cache_file`` of Lamina's cache directory, found on first use.
        self.path = path
        self._stored: dict[bytes, Any] | None = None
        #: What this run compiled or read: key -> (the code marshalled, the type hash it holds
        #: or None, where that number is among its constants: ``place``).
        self.used: dict[bytes, Any] = {}
        self.hits = 0
        self.misses = 0

    def _load(self) -> dict[bytes, Any]:
        import marshal

        if self.path is None:
            from lamina.encodings import cache_dir

            root = cache_dir()
            if root is None:
                return {}
            self.path = cache_file(root)
        try:
            stored = marshal.loads(self.path.read_bytes())
        except (OSError, ValueError, EOFError, TypeError):
            stored = None
        return stored if isinstance(stored, dict) else {}

    def compile(
        self,
        source: Any,
        filename: Any,
        mode: str,
        flags: int = 0,
        dont_inherit: bool = False,
        optimize: int = -1,
        *,
        _feature_version: int = -1,
    ) -> Any:
        """``builtins.compile``, with generated source's code read from the cache."""
        if not dont_inherit:  # what the builtin inherits: the calling frame's future flags
            flags |= sys._getframe(1).f_code.co_flags & FUTURE_FLAGS
        if (
            type(source) is not str
            or type(filename) is not str
            or not filename.startswith("<")
            or mode != "exec"
            or flags & ~FUTURE_FLAGS
            or _feature_version != -1
        ):
            return _builtin_compile(
                source, filename, mode, flags, True, optimize, _feature_version=_feature_version
            )
        general, number = _general(source)
        key = _key(general, filename, flags, optimize)
        if self._stored is None:
            self._stored = {}  # what a compilation while loading (an import) finds
            self._stored = self._load()
        stored = self._stored.get(key)
        code = _code_for(stored, filename, number)
        if code is None:
            import marshal

            code = _builtin_compile(source, filename, mode, flags, True, optimize)
            self.misses += 1
            self.used[key] = (marshal.dumps(code), number, place(code, number))
        else:
            self.hits += 1
            self.used[key] = stored
        return code

    def save(self) -> None:
        """Write the cache when this run compiled something it did not hold."""
        if not self.misses or self.path is None:
            return
        import marshal

        from lamina.encodings import write_atomically

        entries = dict(self._stored or {})
        entries.update(self.used)
        if len(entries) > MAX_ENTRIES:
            entries = dict(self.used)
        try:
            data = marshal.dumps(entries)
        except ValueError:  # an entry marshal cannot write: store only this run's
            data = marshal.dumps(self.used)
        write_atomically(self.path, data)


#: attrs' ``__hash__`` starts its tuple with a hash of the class's name, which differs in
#: every process (string hashing is randomized): the one number a class's code varies by.
_TYPE_HASH = re.compile(r"hash\(\(\n *(-?\d+),\n")


def _general(source: str) -> tuple[str, int | None]:
    """``source`` with its one attrs type hash (if any) written 0, and that number."""
    found = list(_TYPE_HASH.finditer(source))
    if len(found) != 1:
        return source, None
    start, end = found[0].span(1)
    return source[:start] + "0" + source[end:], int(found[0].group(1))


def _code_for(stored: Any, filename: str, number: int | None) -> CodeType | None:
    """The stored code for ``filename`` holding ``number`` as its type hash, or ``None``.
    Entries hold their code marshalled, read only when used (a file holds other commands'
    code too)."""
    import marshal

    if type(stored) is not tuple or len(stored) != 3 or type(stored[0]) is not bytes:
        return None
    data, held, where = stored
    try:
        code = marshal.loads(data)
    except (ValueError, EOFError, TypeError):
        return None
    if type(code) is not CodeType or code.co_filename != filename:
        return None
    if held == number:
        return code
    if type(held) is not int or type(number) is not int or type(where) is not tuple:
        return None
    try:
        swapped: CodeType = _put(code, where, held, number)
    except (IndexError, TypeError, ValueError):
        return None
    return swapped


def place(code: CodeType, number: int | None) -> tuple[int, ...] | None:
    """Where ``number`` is among ``code``'s constants, as indices through nested code and
    folded tuples, when it is there exactly once (else ``None``: no other number can be put
    in its place, as compiling would share a constant used twice)."""
    if number is None:
        return None
    found: list[tuple[int, ...]] = []

    def walk(k: Any, path: tuple[int, ...]) -> None:
        if type(k) is int and k == number:
            found.append(path)
        elif type(k) is tuple:
            for i, item in enumerate(k):
                walk(item, (*path, i))
        elif type(k) is CodeType:
            for i, item in enumerate(k.co_consts):
                walk(item, (*path, i))

    walk(code, ())
    return found[0] if len(found) == 1 else None


def _put(k: Any, where: tuple[int, ...], old: int, new: int) -> Any:
    """``k`` with the constant ``old`` at ``where`` made ``new``: what compiling the source
    with ``new`` gives, but for the column where that literal ends (a constant's load never
    raises, so no traceback shows it)."""
    if not where:
        if type(k) is not int or k != old:
            raise ValueError("the stored number is not where it was stored")
        return new
    i, rest = where[0], where[1:]
    if type(k) is CodeType:
        consts = list(k.co_consts)
        consts[i] = _put(consts[i], rest, old, new)
        return k.replace(co_consts=tuple(consts))
    if type(k) is tuple:
        items = list(k)
        items[i] = _put(items[i], rest, old, new)
        return tuple(items)
    raise ValueError("the stored place leads nowhere")


def _key(source: str, filename: str, flags: int, optimize: int) -> bytes:
    import hashlib

    head = f"{flags}\0{optimize}\0{len(filename)}\0{filename}\0".encode("utf-8", "surrogatepass")
    return hashlib.sha256(head + source.encode("utf-8", "surrogatepass")).digest()


def install() -> CompileCache | None:
    """Route ``compile`` through a cache in Lamina's cache directory (``LAMINA_CACHE_DIR``
    empty: nothing done), saved when the process exits. For the console script only."""
    import atexit
    import os

    if os.environ.get("LAMINA_CACHE_DIR") == "" or builtins.compile is not _builtin_compile:
        return None
    cache = CompileCache()
    builtins.compile = cache.compile
    atexit.register(cache.save)
    return cache

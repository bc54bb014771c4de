"""Opening Lamina's pages in a real browser for tests: Debian's headless Chromium (a new, empty
profile each time, background networking off), the DOM it built read back with the standard
library's HTML parser, and its screenshots decoded to pixels (8-bit RGB(A) PNG, no
dependencies). ``scripts/ensure-chromium.sh`` installs the browser."""

from __future__ import annotations

import os
import shutil
import struct
import subprocess
import zlib
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path

#: Debian's package puts its launcher here.
CHROMIUM = "/usr/bin/chromium"
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
)
MISSING = (
    "Debian's chromium is not installed (/usr/bin/chromium): `./dev test` installs it as root "
    "(scripts/ensure-chromium.sh), or run: apt-get install chromium"
)
VOID = {"meta", "br", "img", "input", "link", "hr", "area", "base", "col", "source", "wbr"}


def find_chromium() -> str | None:
    """The Chromium binary, or ``None`` when it is not installed."""
    return CHROMIUM if os.access(CHROMIUM, os.X_OK) else shutil.which("chromium")


def in_ci() -> bool:
    """Whether this is CI (``CI=true``), where a missing browser is a failure, not a skip."""
    return os.environ.get("CI", "").lower() in ("1", "true", "yes")


def browse(chromium: str, scratch: Path, page: Path, *args: str) -> bytes:
    """Run headless Chromium on ``page`` with a new, empty profile under ``scratch``; its
    standard output."""
    profile = scratch / f"profile-{len(list(scratch.glob('profile-*')))}"
    profile.mkdir(parents=True)
    cmd = [chromium, *FLAGS, f"--user-data-dir={profile}", *args, page.as_uri()]
    proc = subprocess.run(cmd, capture_output=True, timeout=180)
    if proc.returncode != 0:
        tail = proc.stderr.decode("utf-8", "replace")[-2000:]
        raise AssertionError(f"chromium exited with {proc.returncode}: {tail}")
    return proc.stdout


def rendered(chromium: str, scratch: Path, page: Path) -> Node:
    """The DOM as Chromium built it from ``page``."""
    return parse(browse(chromium, scratch, page, "--dump-dom").decode("utf-8"))


def screenshot(chromium: str, scratch: Path, page: Path, *, width: int, height: int) -> Path:
    """A ``width`` by ``height`` screenshot of ``page`` (a PNG file under ``scratch``)."""
    shot = scratch / f"{page.stem}-{len(list(scratch.glob('*.png')))}.png"
    browse(chromium, scratch, page, f"--screenshot={shot}", f"--window-size={width},{height}")
    return shot


class Node:
    """An element of a parsed page: tag, attributes, children (nodes and text)."""

    def __init__(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tag = tag
        self.attrs: dict[str, str] = {k: v or "" for k, v in attrs}
        self.children: list[Node | str] = []

    def text(self) -> str:
        return "".join(c if isinstance(c, str) else c.text() for c in self.children)

    def walk(self) -> Iterator[Node]:
        yield self
        for c in self.children:
            if isinstance(c, Node):
                yield from c.walk()

    def select(self, cls: str | None = None, *, tag: str | None = None, **attrs: str) -> list[Node]:
        """Descendants (and self) with class ``cls``, tag ``tag`` and these attributes
        (``data_number="3"`` means ``data-number``)."""
        return [
            n
            for n in self.walk()
            if (cls is None or cls in n.attrs.get("class", "").split())
            and (tag is None or n.tag == tag)
            and all(n.attrs.get(k.replace("_", "-")) == v for k, v in attrs.items())
        ]

    def by_id(self, ident: str) -> Node:
        found = self.select(id=ident)
        if not found:
            raise AssertionError(f"no element with id {ident!r}")
        return found[0]


class _TreeBuilder(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.root = Node("#document", [])
        self.stack = [self.root]

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        node = Node(tag, attrs)
        self.stack[-1].children.append(node)
        if tag not in VOID:
            self.stack.append(node)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.stack[-1].children.append(Node(tag, attrs))

    def handle_endtag(self, tag: str) -> None:
        for i in range(len(self.stack) - 1, 0, -1):
            if self.stack[i].tag == tag:
                del self.stack[i:]
                return

    def handle_data(self, data: str) -> None:
        self.stack[-1].children.append(data)


def parse(page: str) -> Node:
    """``page`` as a tree of ``Node`` s (the standard library's parser)."""
    builder = _TreeBuilder()
    builder.feed(page)
    builder.close()
    return builder.root


def read_png(data: bytes) -> tuple[int, int, list[list[bytes]]]:
    """Width, height and rows of RGB pixels of an 8-bit, non-interlaced RGB(A) PNG."""
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError("not a PNG")
    pos, idat, header = 8, [], None
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind, body = data[pos + 4 : pos + 8], data[pos + 8 : pos + 8 + length]
        pos += 12 + length
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat.append(body)
    if header is None:
        raise ValueError("a PNG without a header")
    width, height, depth, colour, _, _, interlace = header
    if depth != 8 or colour not in (2, 6) or interlace != 0:
        raise ValueError(f"unsupported PNG (depth {depth}, colour type {colour})")
    bpp = 3 if colour == 2 else 4
    raw, stride = zlib.decompress(b"".join(idat)), width * bpp
    out, prev = [], bytearray(stride)
    for y in range(height):
        start = y * (stride + 1)
        kind, line = raw[start], bytearray(raw[start + 1 : start + 1 + stride])
        for i in range(stride) if kind else ():
            a = line[i - bpp] if i >= bpp else 0
            b, c = prev[i], (prev[i - bpp] if i >= bpp else 0)
            if kind == 1:
                pred = a
            elif kind == 2:
                pred = b
            elif kind == 3:
                pred = (a + b) >> 1
            else:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                pred = a if pa <= pb and pa <= pc else (b if pb <= pc else c)
            line[i] = (line[i] + pred) & 255
        out.append([bytes(line[x : x + 3]) for x in range(0, stride, bpp)])
        prev = line
    return width, height, out

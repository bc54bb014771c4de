"""Console examples in the docs are run, so they cannot go stale.

A ``console`` block preceded by ``<!-- docs-example: cwd=DIR [setup=COMMAND] -->`` is run in a
fresh copy of ``DIR`` (relative to the repository; ``setup`` runs first): each ``$ lamina …``
line runs with this environment's ``lamina`` and what it prints (standard output and error)
must be exactly the lines that follow it in the block.
"""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BLOCK = re.compile(r"<!-- docs-example: (?P<args>[^>]*) -->\s*```console\n(?P<body>.*?)```", re.S)
LAMINA = str(Path(sys.executable).parent / "lamina")


def examples() -> list[tuple[str, dict[str, str], str]]:
    found = []
    for page in sorted((ROOT / "docs").glob("*.md")):
        for m in BLOCK.finditer(page.read_text(encoding="utf-8")):
            args = dict(
                re.findall(r'(\w+)=(?:"([^"]*)"|(\S+))', m["args"])
                and [(k, a or b) for k, a, b in re.findall(r'(\w+)=(?:"([^"]*)"|(\S+))', m["args"])]
            )
            found.append((page.name, args, m["body"]))
    return found


EXAMPLES = examples()


def run(command: str, cwd: Path) -> str:
    argv = shlex.split(command)
    argv[0] = LAMINA if argv[0] == "lamina" else argv[0]
    done = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=120)
    return (done.stdout + done.stderr).rstrip("\n")


def test_the_docs_have_examples_to_run():
    assert len(EXAMPLES) >= 2


@pytest.mark.parametrize(("page", "args", "body"), EXAMPLES, ids=[e[0] for e in EXAMPLES])
def test_console_example_prints_what_the_docs_show(page, args, body, tmp_path):
    work = tmp_path / "work"
    shutil.copytree(ROOT / args.get("cwd", "."), work, ignore=shutil.ignore_patterns("*.db"))
    if "setup" in args:
        run(args["setup"], work)
    commands: list[tuple[str, list[str]]] = []
    for line in body.rstrip("\n").splitlines():
        if line.startswith("$ "):
            commands.append((line[2:], []))
        else:
            commands[-1][1].append(line)
    for command, expected in commands:
        assert run(command, work) == "\n".join(expected), f"{page}: $ {command}"

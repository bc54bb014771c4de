"""The console script (``lamina.cli.run``) ends without the interpreter's teardown, yet prints,
exits and runs exit handlers exactly as ``lamina.cli.main`` followed by a normal exit does."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

#: Runs a command the library way (``main()``, then Python's own exit) or the console
#: script's way (``run()``), with argv from the command line.
ENTRY = (
    "import sys\n"
    "from lamina import cli\n"
    "how, sys.argv = sys.argv[1], ['lamina', *sys.argv[2:]]\n"
    "cli.main() if how == 'main' else cli.run()\n"
)


def _lamina(how: str, *args: str, stdin: str = "", code: str = ENTRY, **kw: object):
    env = {**os.environ, "LAMINA_PLUGINS": ""}
    return subprocess.run(
        [sys.executable, "-c", code, how, *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        **kw,
    )


@pytest.mark.parametrize(
    "args",
    [
        ("--help",),
        ("--version",),
        ("nosuch",),
        ("tokens", "--json", "-"),
        ("tokens", "--model", "claude-sonnet-4", "-"),
        ("assemble", "--model", "gpt-4o", "--format", "json"),
        ("assemble", "--model", "gpt-4o", "--format", "text", "--show-report"),
        ("assemble", "--model", "gpt-4o", "--max-tokens", "1", "--format", "text"),
        ("assemble", "--config", "/nonexistent/lamina.toml", "--message", "hi"),
        ("assemble", "--model", "gpt-4o", "--time", "not a time", "--message", "hi"),
    ],
)
def test_output_and_exit_code_are_the_same_as_a_normal_exit(args, tmp_path):
    # Long enough to exceed a pipe's buffer, so unflushed output would show.
    stdin = "Compare staging with prod, 日本語 🦜.\n" * 20_000
    normal = _lamina("main", *args, stdin=stdin, cwd=tmp_path)
    fast = _lamina("run", *args, stdin=stdin, cwd=tmp_path)
    assert (fast.returncode, fast.stdout, fast.stderr) == (
        normal.returncode,
        normal.stdout,
        normal.stderr,
    )
    assert fast.stdout or fast.stderr


def test_python_dash_m_lamina_is_the_console_script(tmp_path):
    out = subprocess.run(
        [sys.executable, "-m", "lamina", "tokens", "--json", "-"],
        input="hello world",
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
    )
    assert out.returncode == 0 and '"tokens": 2' in out.stdout, out.stderr


HOOKS = (
    "import atexit, sys, threading, time\n"
    "class Witness:\n"
    "    def __del__(self):\n"
    "        sys.stderr.write('torn down\\n')\n"
    "witness = Witness()\n"
    "atexit.register(lambda: print('exit handler ran', flush=True))\n"
    "if 'thread' in sys.argv:\n"
    "    sys.argv.remove('thread')\n"
    # Runs until the main thread ends (whatever the machine's load), then prints.
    "    main = threading.main_thread()\n"
    "    def wait():\n"
    "        while main.is_alive():\n"
    "            time.sleep(0.01)\n"
    "        print('thread done')\n"
    "    threading.Thread(target=wait).start()\n" + ENTRY
)


def test_the_console_script_skips_teardown_but_runs_exit_handlers():
    normal = _lamina("main", "--version", code=HOOKS)
    fast = _lamina("run", "--version", code=HOOKS)
    assert "torn down" in normal.stderr and "torn down" not in fast.stderr
    for out in (normal, fast):
        assert out.returncode == 0
        assert out.stdout.endswith("exit handler ran\n"), out.stdout


def test_a_running_thread_is_waited_for_as_usual():
    out = _lamina("run", "thread", "--version", code=HOOKS)
    assert out.returncode == 0
    assert "thread done" in out.stdout and "exit handler ran" in out.stdout
    assert "torn down" in out.stderr  # the ordinary exit, which waits for the thread


def test_a_closed_pipe_ends_as_before(tmp_path):
    """Output into a pipe whose reader has gone: the same status and message either way."""
    results = []
    for how in ("main", "run"):
        proc = subprocess.Popen(
            [sys.executable, "-c", ENTRY, how, "tokens", "--json", "-"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env={**os.environ, "LAMINA_PLUGINS": ""},
            cwd=tmp_path,
        )
        assert proc.stdout is not None and proc.stdin is not None
        proc.stdout.close()
        _, err = proc.communicate(b"hello world")
        results.append((proc.returncode, err))
    assert results[0] == results[1]

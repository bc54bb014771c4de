"""Start-up: ``lamina assemble`` on the example workspace against ``python -c pass``, in one run.

The example workspace (``examples/workspace``) is copied to a temporary folder and its demo
session imported into the copy's ledger, untimed, so nothing is written into the repository.
Then, in interleaved rounds, each of these runs as a fresh process:

* ``python -c pass``: the interpreter alone, the floor every command pays;
* ``lamina --help``: the command line without any plugin;
* ``lamina assemble``: what ``./dev demo`` runs (``--format text --show-report``), with a fixed
  ``--time`` so every run assembles the same bytes.

Processes run as an installed Lamina does: with bytecode caches (written under a temporary
``PYTHONPYCACHEPREFIX``, so the tree stays clean; ``--no-bytecode`` measures without them) and
with Lamina's own caches (the tiktoken ranks, the models index, attrs' and cattrs' compiled
code, the entry points, the workspace's manifest) in a temporary ``LAMINA_CACHE_DIR``, built by
one untimed warm-up run. ``--importtime`` prints what
``lamina assemble`` imports, heaviest first (``python -X importtime``), after the timings;
``--stages`` times the steps of one start from inside the process (imports, plugins, model
info, tokenizer, assembly, output).

Run: ``.venv/bin/python bench/bench_startup.py [--repeat 10] [--stages] [--importtime]``
Times are wall clock per process (``time.perf_counter`` around ``subprocess.run``); medians
and minimums over the rounds.
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "workspace"
MESSAGE = "Compare staging with prod and propose the smallest fix."
TIME = "2026-03-01T09:00:00+00:00"


def lamina_command() -> list[str]:
    """The ``lamina`` console script next to this interpreter (else ``python -m lamina``)."""
    script = Path(sys.executable).with_name("lamina")
    return [str(script)] if script.exists() else [sys.executable, "-m", "lamina"]


def workspace(folder: Path, env: dict[str, str]) -> Path:
    """A copy of the example with its demo session imported (as ``./dev demo`` does)."""
    copy = folder / "workspace"
    shutil.copytree(EXAMPLE, copy, ignore=shutil.ignore_patterns("ledger.db*"))
    subprocess.run(
        [
            *lamina_command(),
            "ledger",
            "import",
            str(copy / "sessions" / "demo.jsonl"),
            "--session",
            "demo",
            "--config",
            str(copy / "lamina.toml"),
        ],
        check=True,
        capture_output=True,
        env=env,
    )
    return copy / "lamina.toml"


def timed(args: Sequence[str], env: dict[str, str]) -> float:
    started = time.perf_counter()
    done = subprocess.run(args, capture_output=True, env=env)
    took = 1000 * (time.perf_counter() - started)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(args)} failed:\n{done.stderr.decode()}")
    return took


def importtime(args: Sequence[str], env: dict[str, str], top: int = 25) -> list[str]:
    """The modules ``args`` imports, by cumulative import time (top level only), in a second
    run."""
    run = [sys.executable, "-X", "importtime", *args[1:]] if args[0] == sys.executable else None
    if run is None:
        run = [sys.executable, "-X", "importtime", "-m", "lamina", *args[1:]]
    # Twice, the first to fill the caches for this command's sys.path (``-m`` puts the
    # current folder first), the second measured.
    for _ in range(2):
        done = subprocess.run(run, capture_output=True, env=env, text=True)
    rows = []
    total = 0
    for line in done.stderr.splitlines():
        m = re.match(r"import time:\s+(\d+) \|\s+(\d+) \|( *)(\S+)", line)
        if m:
            total += int(m.group(1))
            if len(m.group(3)) == 1:
                rows.append((int(m.group(2)), m.group(4)))
    rows.sort(reverse=True)
    lines = [f"imports in all: {total / 1000:.1f} ms (as -X importtime counts, which adds to it)"]
    lines += [f"  {us / 1000:7.1f} ms  {name}" for us, name in rows[:top]]
    return lines


#: One start-up split into stages, timed inside the process (the same steps ``lamina
#: assemble`` takes, in order); prints the milliseconds of each, space-separated.
STAGES_SCRIPT = """
import sys, time
config, message = sys.argv[1], sys.argv[2]
t = [time.perf_counter()]
import click, lamina.cli
from lamina._compiled import install
install()  # as the console script does: generated code read from Lamina's cache
t.append(time.perf_counter())
from lamina.assembly.engine import Assembler
t.append(time.perf_counter())
from lamina.config import load_config
cfg = load_config(config)
assembler = Assembler(cfg)
t.append(time.perf_counter())
info, _ = assembler.host.model_info(cfg.model)
t.append(time.perf_counter())
assembler.model(cfg.model)
t.append(time.perf_counter())
from datetime import datetime
ctx = assembler.assemble(assembler.request(message, time=datetime.fromisoformat(sys.argv[3])))
t.append(time.perf_counter())
from lamina.reporting import dump_yaml, render_text, report_document
out = render_text(ctx) + dump_yaml(report_document(ctx))
t.append(time.perf_counter())
print(" ".join(f"{1000 * (b - a):.2f}" for a, b in zip(t, t[1:])))
"""
STAGES = (
    "click and lamina.cli",
    "the kernel (lamina.assembly.engine)",
    "config and plugins (entry points, imports, settings)",
    "model info (the models catalog)",
    "tokenizer (resolved; tiktoken builds its BPE only if counting needs it)",
    "the assembly (providers included)",
    "text and YAML report",
)


def stages(config: Path, env: dict[str, str], repeat: int) -> list[str]:
    """Medians of each stage over ``repeat`` fresh processes."""
    runs = []
    for _ in range(repeat):
        done = subprocess.run(
            [sys.executable, "-c", STAGES_SCRIPT, str(config), MESSAGE, TIME],
            capture_output=True,
            env=env,
            text=True,
            check=True,
        )
        runs.append([float(x) for x in done.stdout.split()])
    medians = [statistics.median(col) for col in zip(*runs, strict=True)]
    lines = [f"stages inside one start (medians of {repeat} processes):"]
    lines += [f"  {ms:7.1f} ms  {name}" for name, ms in zip(STAGES, medians, strict=True)]
    lines.append(f"  {sum(medians):7.1f} ms  in all (the interpreter's own start not included)")
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=10)
    parser.add_argument("--no-bytecode", action="store_true", help="run without .pyc caches")
    parser.add_argument("--importtime", action="store_true", help="print what assemble imports")
    parser.add_argument("--stages", action="store_true", help="time the stages of one start")
    args = parser.parse_args(argv)

    with tempfile.TemporaryDirectory(prefix="lamina-startup-") as tmp:
        folder = Path(tmp)
        env = {**os.environ, "LAMINA_CACHE_DIR": str(folder / "cache")}
        env.pop("LAMINA_DEBUG", None)
        # Bytecode is read from and written to a folder of its own (empty, and never written,
        # with --no-bytecode), whatever caches the tree holds.
        env["PYTHONPYCACHEPREFIX"] = str(folder / "pycache")
        if args.no_bytecode:
            env["PYTHONDONTWRITEBYTECODE"] = "1"
        else:
            env.pop("PYTHONDONTWRITEBYTECODE", None)
        config = workspace(folder, env)
        lamina = lamina_command()
        commands = {
            "python -c pass": [sys.executable, "-c", "pass"],
            "lamina --help": [*lamina, "--help"],
            "lamina assemble": [
                *lamina,
                "assemble",
                "--config",
                str(config),
                "--format",
                "text",
                "--show-report",
                "--time",
                TIME,
                "--message",
                MESSAGE,
            ],
        }
        for command in commands.values():  # warm-up: bytecode and Lamina's caches
            timed(command, env)
        samples: dict[str, list[float]] = {name: [] for name in commands}
        for _ in range(args.repeat):  # interleaved: background load hits all alike
            for name, command in commands.items():
                samples[name].append(timed(command, env))

        print(
            f"machine: {platform.platform()} | Python {platform.python_version()} | "
            f"{os.cpu_count()} CPUs; repeat {args.repeat}; "
            f"bytecode caches {'off' if args.no_bytecode else 'on'}"
        )
        print(f"{'command':<18} {'median':>10} {'min':>10} {'median / pass':>14}")
        floor = statistics.median(samples["python -c pass"])
        for name, times in samples.items():
            median = statistics.median(times)
            print(f"{name:<18} {median:>8.1f}ms {min(times):>8.1f}ms {median / floor:>13.1f}x")
        if args.stages:
            print()
            print("\n".join(stages(config, env, args.repeat)))
        if args.importtime:
            print()
            print("\n".join(importtime(commands["lamina assemble"], env)))
    return 0


if __name__ == "__main__":
    sys.exit(main())

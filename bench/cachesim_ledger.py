"""What a ledger request reads from memory after a collection, simulated: Lamina's
``LedgerSession.assemble`` vs the peer of ``bench_ledger.py`` (its new message counted, then
``trim_messages`` with precomputed counts), per request, under valgrind's cache simulator.

``bench_ledger.py`` times the two after ``gc.collect()``; this machine kind has no hardware
counters to say where the time goes, so this script counts it in a simulation instead. The
loop is ``bench_ledger.py`` 's: the same 32k session, the same peer, a full collection before
each call, the two sides alternating. It runs ``--turns`` turns natively and keeps the ledger,
then replays ``--warm`` more turns and ``--requests`` measured ones under callgrind, once per
side; only the measured side's calls are counted (each runs inside ``sys.call_tracing``,
which callgrind is told to collect in). The caches simulated are this machine kind's: L1
instruction 32 KiB (8-way), L1 data 48 KiB (12-way) and L2 1 MiB (8-way), 64-byte lines.
The simulation has no noise from other work on the machine: runs of the same tree agree
within 1% (temporary paths and addresses differ between runs).

Printed per request, for each side and as Lamina / peer: instructions, L1 instruction misses
(these hit L2, so they cost both warm and cold), and L2 misses, the lines brought from L3 or
memory, split into instructions, data read and data written. After a collection the L2 holds
the collector's walk, not the request's code and data, so L2 misses are what a cold request
pays for. Then, from one request run natively under ``sys.setprofile``: the Python functions
each side ran and the bytes of their bytecode (which the processor reads as data).

``--phases`` also counts each of the kernel's phases alone inside Lamina's request (one run
per phase, each in the whole request, so a phase is charged for the lines it brings in after
the ones before it), and the session's work around the kernel as the rest.

``--keep DIR`` keeps callgrind's output files, so ``callgrind_annotate --inclusive=no`` can
show which of the interpreter's and libraries' C functions the lines were for (and
``--tree=caller`` who called them).

Needs valgrind (``apt install valgrind``) and a Python with its symbols (pyenv's and
Debian's have them). Run: ``.venv/bin/python bench/cachesim_ledger.py [--requests 8]
[--phases [NAMES]] [--keep DIR]`` (about two minutes, ten with every phase; two runs at a
time).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from functools import partial
from pathlib import Path
from typing import Any

SIDES = ("lamina", "peer")
#: The kernel's phases as ``--phases`` counts them: the engine's calls each one makes
#: (``lamina.assembly.engine``, ``Assembler._run``), and the whole kernel. A request grown
#: from its stream's previous context runs ``grown`` instead of place to report.
PHASES = {
    "plan": ("engine", "plan"),
    "gather": ("gather", "Gatherer.gather"),
    "grown": ("engine", "grown"),
    "place": ("engine", "place"),
    "measure": ("engine", "measure"),
    "fit": ("engine", "edit_tool_results", "fit"),
    "format": ("engine", "format_within"),
    "report": ("engine", "report"),
    "kernel": ("engine", "Assembler._run"),
}
CACHES = ["--I1=32768,8,64", "--D1=49152,12,64", "--LL=1048576,8,64"]
BUDGET = 32_000


def _setup(db: str, made: dict[str, Any], turns: int) -> tuple[Any, Any, list[Any], Any]:
    """The session of ``bench_ledger.py`` on ``db``: its assembler, its turns, and the peer's
    history and counter for the first ``turns`` of them."""
    import bench_ledger as bl
    import lamina_ledger.plugin as ledger_plugin
    from bench_cache import build_session

    from lamina.testing import make_assembler

    system, session = build_session(len(made["turns"]))
    cfg = {
        "model": "gpt-4o",
        "session": "bench",
        "budget": {"max_tokens": BUDGET, "reserve_response": 0, "reserve_tools": 0},
        "plugins": {"ledger": {"database": db}},
        "blocks": [{"id": "system", "layer": "workspace", "text": system, "trusted": True}],
    }
    counts: dict[int, int] = {}
    history: list[Any] = []

    def add(i: int) -> None:
        for m, tokens in zip(session[i], made["turns"][i], strict=True):
            lm = bl.to_langchain(m)
            counts[id(lm)] = tokens
            history.append(lm)

    def counter(messages: list[Any]) -> int:
        return sum(counts[id(m)] for m in messages)

    for i in range(turns):
        add(i)
    return (
        make_assembler(cfg, plugins=[("ledger", ledger_plugin)]),
        session,
        history,
        (add, counter),
    )


def build_state(folder: Path, turns: int, total: int) -> None:
    """Natively: the peer's counts and a ledger of ``turns`` turns in ``folder``."""
    import bench_ledger as bl
    from lamina_ledger.session import LedgerSession

    made = bl.counts_elsewhere(total)
    (folder / "made.json").write_text(json.dumps(made))
    a, session, _, _ = _setup(str(folder / "ledger.db"), made, 0)
    with a, LedgerSession(a) as s:
        s.start("bench")
        for turn in session[:turns]:
            request = a.request(turn[0].text)
            s.assemble(request)
            s.record_turn(request, turn)


def _count_phase(phase: str) -> Any:
    """A ``measured`` for ``--phases``: the request runs as it is, but only ``phase``'s calls
    run inside ``sys.call_tracing`` (during measured requests)."""
    import importlib

    module, *names = PHASES[phase]
    owner_module = importlib.import_module(f"lamina.assembly.{module}")
    measuring = [False]
    for dotted in names:
        owner, _, attr = dotted.rpartition(".")
        target = getattr(owner_module, owner) if owner else owner_module
        original = getattr(target, attr)

        def wrapped(*a: Any, _original: Any = original, **k: Any) -> Any:
            if measuring[0]:
                return sys.call_tracing(lambda: _original(*a, **k), ())
            return _original(*a, **k)

        setattr(target, attr, wrapped)

    def measured(call: Any) -> None:
        measuring[0] = True
        try:
            call()
        finally:
            measuring[0] = False

    return measured


def replay(
    folder: Path,
    side: str,
    turns: int,
    warm: int,
    requests: int,
    profile: bool,
    phase: str | None,
) -> None:
    """The loop from turn ``turns`` on, on a copy of the ledger: ``warm`` turns, then
    ``requests`` whose ``side`` call runs inside ``sys.call_tracing`` (with ``phase``, only
    that kernel phase's calls; with ``profile``, the call runs under ``sys.setprofile``,
    printing the Python functions it ran)."""
    import bench_ledger as bl
    from lamina_ledger.session import LedgerSession

    from lamina.tokens import load_encoding

    made = json.loads((folder / "made.json").read_text())
    work = Path(tempfile.mkdtemp())
    for f in folder.glob("ledger.db*"):
        shutil.copy(f, work)
    a, session, history, (add, counter) = _setup(str(work / "ledger.db"), made, turns)
    codes: dict[int, Any] = {}

    def note(frame: Any, event: str, _arg: Any) -> None:
        if event == "call":
            codes[id(frame.f_code)] = frame.f_code

    def measured(call: Any) -> None:
        if not profile:
            sys.call_tracing(call, ())
            return
        sys.setprofile(note)
        try:
            call()
        finally:
            sys.setprofile(None)

    if phase is not None:
        measured = _count_phase(phase)

    encode = None
    with a, LedgerSession(a) as s:
        for i in range(turns, turns + warm + requests):
            request = a.request(session[i][0].text)
            if i == turns + warm // 2:  # the peer's tokenizer, as bench_ledger builds it
                encode = load_encoding("o200k_base").encode_ordinary
            asked = made["asks"][i] if encode is None else None
            peer = partial(bl.peer_request, session[i][0].text, asked, encode, [], history)
            calls = {
                "lamina": partial(s.assemble, request),
                "peer": partial(peer, BUDGET - made["system"], counter),
            }
            before = len(s.compactions)
            for name in ("lamina", "peer") if i % 2 else ("peer", "lamina"):
                gc.collect()
                if i >= turns + warm and name == side:
                    measured(calls[name])
                else:
                    calls[name]()
            if i >= turns + warm and len(s.compactions) > before:
                print(f"request {i} compacted", file=sys.stderr)
            s.record_turn(request, session[i])
            add(i)
    shutil.rmtree(work)
    if profile:
        size = sum(len(c.co_code) for c in codes.values())
        print(json.dumps({"functions": len(codes), "bytecode": size}))


def simulate(folder: Path, args: argparse.Namespace, targets: list[str]) -> dict[str, Any]:
    """Each target (a side, or ``lamina:PHASE``) under callgrind, two at a time: events per
    measured request."""
    found: dict[str, Any] = {}
    for start in range(0, len(targets), 2):
        runs = {}
        for target in targets[start : start + 2]:
            side, _, phase = target.partition(":")
            out = folder / f"callgrind.{target}"
            command = ["valgrind", "--tool=callgrind", "--cache-sim=yes", *CACHES]
            command += ["--collect-atstart=no", "--toggle-collect=_PyEval_CallTracing"]
            command += [f"--callgrind-out-file={out}", sys.executable, __file__]
            command += ["--replay", side, str(folder), *_loop_args(args)]
            command += [f"--phase={phase}"] if phase else []
            log = (folder / f"{target}.log").open("w")
            runs[target] = (subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT), out)
        for target, (run, out) in runs.items():
            if run.wait() != 0:
                raise SystemExit(f"callgrind failed for {target}: see {folder / target}.log")
            found[target] = _totals(out, args.requests, phase=":" in target)
    return found


def _totals(out: Path, requests: int, *, phase: bool = False) -> dict[str, float]:
    """Events per request; a phase that never ran (a grown request runs no place to
    report) counts nothing."""
    text = out.read_text()
    events = re.search(r"^events: (.+)$", text, re.M)
    totals = re.search(r"^(?:totals|summary): (.+)$", text, re.M)
    if events is None or totals is None:
        raise SystemExit(f"no totals in {out}")
    values = dict(zip(events.group(1).split(), map(int, totals.group(1).split()), strict=False))
    if not values.get("Ir") and not phase:
        raise SystemExit(
            "callgrind counted nothing: this Python has no _PyEval_CallTracing symbol "
            "(a stripped build?)"
        )
    return {k: v / requests for k, v in values.items()}


def _lines(events: dict[str, float]) -> float:
    """L2 misses of every kind: the lines a request brings in from L3 or memory."""
    return events.get("ILmr", 0) + events.get("DLmr", 0) + events.get("DLmw", 0)


def _loop_args(args: argparse.Namespace) -> list[str]:
    return [f"--turns={args.turns}", f"--warm={args.warm}", f"--requests={args.requests}"]


def footprint(folder: Path, args: argparse.Namespace, side: str) -> dict[str, int]:
    """The Python functions ``side`` ran in the first measured request, and their bytecode."""
    command = [sys.executable, __file__, "--replay", side, str(folder), "--profile"]
    loop = [f"--turns={args.turns}", f"--warm={args.warm}", "--requests=1"]
    out = subprocess.run([*command, *loop], check=True, capture_output=True, text=True).stdout
    found: dict[str, int] = json.loads(out.strip().splitlines()[-1])
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=280, help="turns run natively first")
    parser.add_argument("--warm", type=int, default=20, help="turns replayed unmeasured")
    parser.add_argument("--requests", type=int, default=8, help="requests measured per side")
    parser.add_argument("--replay", choices=SIDES, help=argparse.SUPPRESS)
    parser.add_argument("state", nargs="?", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--profile", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--phase", choices=PHASES, help=argparse.SUPPRESS)
    parser.add_argument(
        "--phases",
        nargs="?",
        const=",".join(PHASES),
        default="",
        help="also count each kernel phase of Lamina's request (or only these, comma-separated)",
    )
    parser.add_argument(
        "--keep",
        type=Path,
        help="copy callgrind's output files here (read them with callgrind_annotate)",
    )
    args = parser.parse_args()
    if args.replay:
        replay(
            args.state,
            args.replay,
            args.turns,
            args.warm,
            args.requests,
            args.profile,
            args.phase,
        )
        return 0
    if shutil.which("valgrind") is None:
        print("cachesim_ledger: valgrind is not installed (apt install valgrind)", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        build_state(folder, args.turns, args.turns + args.warm + args.requests)
        phases = [p for p in args.phases.split(",") if p]
        unknown = set(phases) - set(PHASES)
        if unknown:
            raise SystemExit(
                f"unknown phases: {', '.join(sorted(unknown))}; known: {', '.join(PHASES)}"
            )
        targets = [*SIDES, *(f"lamina:{p}" for p in phases)]
        sim = simulate(folder, args, targets)
        code = {side: footprint(folder, args, side) for side in SIDES}
        if args.keep is not None:
            args.keep.mkdir(parents=True, exist_ok=True)
            for out in folder.glob("callgrind.*"):
                shutil.copy(out, args.keep)
    rows = [
        ("instructions", "Ir"),
        ("L1 instruction misses", "I1mr"),
        ("L2 misses, instructions", "ILmr"),
        ("L2 misses, data read", "DLmr"),
        ("L2 misses, data written", "DLmw"),
    ]
    print(
        f"Per request after {args.turns + args.warm} turns at {BUDGET // 1000}k, a collection "
        f"before each ({args.requests} requests per side, callgrind's cache simulation)"
    )
    print(f"  {'':26s} {'Lamina':>12s} {'peer':>12s}  Lamina / peer")
    for label, key in rows:
        lamina, peer = sim["lamina"][key], sim["peer"][key]
        print(f"  {label:26s} {lamina:12,.0f} {peer:12,.0f}  {lamina / peer:.2f}x")
    misses = {s: _lines(sim[s]) for s in SIDES}
    ratio = misses["lamina"] / misses["peer"]
    print(
        f"  {'L2 misses, all':26s} {misses['lamina']:12,.0f} {misses['peer']:12,.0f}  {ratio:.2f}x"
    )
    for side in SIDES:
        print(
            f"  {side}: {code[side]['functions']} Python functions, "
            f"{code[side]['bytecode']:,} bytes of their bytecode (one request)"
        )
    if args.phases:
        print("Lamina's request by phase: L2 misses (instructions, data read, data written)")
        for phase in (p for p in PHASES if f"lamina:{p}" in sim):
            got = sim[f"lamina:{phase}"]
            share = _lines(got) / misses["lamina"]
            print(
                f"  {phase:8s} {_lines(got):8,.0f} ({got.get('ILmr', 0):,.0f}, "
                f"{got.get('DLmr', 0):,.0f}, {got.get('DLmw', 0):,.0f})  {share:4.0%}"
            )
        if "lamina:kernel" in sim:
            rest = misses["lamina"] - _lines(sim["lamina:kernel"])
            print(f"  {'session':8s} {rest:8,.0f} (the rest: the session's work around the kernel)")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).parent))
    os.environ.setdefault("PYTHONHASHSEED", "0")  # the replays' dicts laid out alike each run
    raise SystemExit(main())

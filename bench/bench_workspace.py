"""A host's turn loop on the example workspace: ``Assembler.assemble`` per request against a
hand-rolled host that builds the same prompt from the same files, in one run.

The example workspace (``examples/workspace``, what ``./dev demo`` assembles) is copied to a
temporary folder and its demo session imported into the copy's ledger, untimed. One process
then times, in interleaved rounds (each request alternating which side runs first):

* Lamina: ``assemble`` of a new message on the example's config (the workspace plugin reads
  the persona, the user, the working set and its files; nexus renders its status file; the
  ledger supplies the session's history; tools filtered by permissions; a report).
* the peer, a hand-rolled host on the same inputs given its best fair configuration: it reads
  the same files on every request, as a host must (they change between turns: the model edits
  the working set), the log's last 40 lines as the working set asks; counts each text once
  (tiktoken, memoized by the text); joins them into a system prompt; counts the new message;
  and keeps the newest history that fits with LangChain ``trim_messages``, whose
  ``token_counter`` reads the history's counts made beforehand.

Both count with ``o200k_base`` (gpt-4o, the example's model). Medians per request and their
ratio (Lamina / peer). Run: ``.venv/bin/python bench/bench_workspace.py [--requests 200]``
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from bench_startup import MESSAGE, workspace
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, trim_messages

from lamina import Assembler
from lamina.tokens import load_encoding

#: The files the example's prompt is built from, as the peer reads them (the working set's
#: log file: its last ``LOG_LINES`` lines).
FILES = (
    "AGENTS.md",
    "IDENTITY.md",
    "personas/atlas/SOUL.md",
    "personas/atlas/IDENTITY.md",
    "personas/atlas/PERMISSIONS.md",
    "working-set.yml",
    ".agent/constitution.md",
    "current_task.md",
    "src/config_loader.py",
    "config/staging.toml",
    "notes.md",
)
LOG = "tool/terminal/log-latest.txt"
LOG_LINES = 40
STATUS = "nexus-status.json"
BUDGET = 128_000 - 4096 - 8192  # gpt-4o's window less the example's reserves


def peer(root: Path) -> Callable[[str], list[BaseMessage]]:
    """The hand-rolled host's request: ``message`` in, the history kept for it out."""
    enc = load_encoding("o200k_base")
    memo: dict[str, int] = {}

    def count(text: str) -> int:
        found = memo.get(text)
        if found is None:
            found = memo[text] = len(enc.encode_ordinary(text))
        return found

    history: list[BaseMessage] = []
    for line in (root / "sessions" / "demo.jsonl").read_text().splitlines():
        entry = json.loads(line)
        message = entry.get("message")
        if entry["type"] != "message" or message["role"] not in ("user", "assistant"):
            continue
        content = message["content"]
        if not isinstance(content, str):
            content = "\n".join(p.get("text", "") for p in content if p.get("type") == "text")
        kind = HumanMessage if message["role"] == "user" else AIMessage
        history.append(kind(content=content))
    counts = {id(m): count(str(m.content)) + 4 for m in history}  # made beforehand

    def counter(messages: list[BaseMessage]) -> int:
        return sum(counts[id(m)] for m in messages)

    def request(message: str) -> list[BaseMessage]:
        parts = [f'<file path="{name}">\n{(root / name).read_text()}\n</file>' for name in FILES]
        log = (root / LOG).read_text().splitlines()[-LOG_LINES:]
        parts.append(f'<file path="{LOG}">\n' + "\n".join(log) + "\n</file>")
        status = json.loads((root / STATUS).read_text())
        parts.append("<status>\n" + json.dumps(status, indent=2, sort_keys=True) + "\n</status>")
        system = sum(count(p) for p in parts) + count("\n\n") * (len(parts) - 1)
        asked = len(enc.encode_ordinary(message))
        kept: list[BaseMessage] = trim_messages(
            history,
            max_tokens=BUDGET - system - asked,
            token_counter=counter,
            strategy="last",
            start_on="human",
        )
        return kept

    return request


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=200, help="requests timed per side")
    parser.add_argument("--warmup", type=int, default=20, help="untimed requests first")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "LAMINA_CACHE_DIR": f"{tmp}/cache"}
        config = workspace(Path(tmp), env)
        os.environ["LAMINA_CACHE_DIR"] = env["LAMINA_CACHE_DIR"]
        hand_rolled = peer(config.parent)
        lamina_ms: list[float] = []
        peer_ms: list[float] = []
        with Assembler.from_config(config) as a:
            sides = (lambda m: a.assemble(a.request(m)), hand_rolled)
            for i in range(args.warmup + args.requests):
                message = f"{MESSAGE} (request {i})"
                took = {}
                for side in (0, 1) if i % 2 else (1, 0):
                    started = time.perf_counter()
                    sides[side](message)
                    took[side] = 1000 * (time.perf_counter() - started)
                if i >= args.warmup:
                    lamina_ms.append(took[0])
                    peer_ms.append(took[1])
    lamina, hand = statistics.median(lamina_ms), statistics.median(peer_ms)
    print(f"{platform.python_implementation()} {platform.python_version()}, {os.cpu_count()} CPUs")
    print(
        f"the example workspace, {args.requests} requests per side: Lamina {lamina:.2f} ms, "
        f"hand-rolled {hand:.2f} ms, Lamina / hand-rolled {lamina / hand:.2f}x"
    )


if __name__ == "__main__":
    main()

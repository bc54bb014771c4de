"""Loom over a long tree position: ``Loom.dialogue`` and ``Loom.buffer`` against a hand-rolled
host on the same stored tree, in one run.

The tree is a chain of ``--nodes`` nodes (2,000 by default), human and model nodes taking
turns, each about 300 characters of prose: about 130,000 tokens in all, more than gpt-4o's
window less the Loom default response buffer (1,024 tokens), so both modes cut. It is saved
in a ``SQLiteStore`` in a temporary folder. Each call assembles the chain's last node, as an
editor does after every new node; each side loads the tree from the same store every call
(another window may have changed it).

* Lamina: ``Loom.dialogue`` (the path as messages, fitted by the kernel with the tree's
  preferences: truncateMiddle, the newest four nodes protected) and ``Loom.buffer`` (one
  document, cut in the middle on token boundaries).
* the peer, hand-rolled with its best fair configuration: load the tree, walk the parents
  from the node to the root, then for dialogue keep the newest messages that fit with
  LangChain ``trim_messages`` reading each node's count made beforehand; for buffer join the
  texts, encode the document with tiktoken and keep its last tokens that fit (decoded).

Medians of ``--repeat`` calls per side, interleaved, ``gc.collect()`` before each (so neither
side pays for collecting the other's garbage), and their ratio (Lamina / peer).
Run: ``.venv/bin/python bench/bench_loom.py [--nodes 2000] [--repeat 12]``
"""

from __future__ import annotations

import argparse
import gc
import os
import platform
import statistics
import tempfile
import time
from collections.abc import Callable
from typing import Any

from lamina_loom import Edge, EdgeSource, Loom, Node, SQLiteStore, Tree
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, trim_messages

from lamina.tokens import load_encoding

#: gpt-4o's window less the Loom default response buffer.
AVAILABLE = 128_000 - 1024


def build_tree(count: int) -> Tree:
    prose = "Line {i} of the story, where things happen and then more things happen. "
    nodes = [
        Node(
            id=f"n{i}",
            author_type="human" if i % 2 == 0 else "model",
            content=prose.format(i=i) * 4,
        )
        for i in range(count)
    ]
    edges = [
        Edge(id=f"e{i}", target=f"n{i}", sources=(EdgeSource(node=f"n{i - 1}"),))
        for i in range(1, count)
    ]
    return Tree(id="story", nodes=tuple(nodes), edges=tuple(edges))


def peer(store: SQLiteStore, tree: Tree) -> tuple[Callable[[str], Any], Callable[[str], Any]]:
    """The hand-rolled host's dialogue and buffer calls."""
    enc = load_encoding("o200k_base")
    counts = {n.id: len(enc.encode_ordinary(n.content)) + 4 for n in tree.nodes}  # beforehand

    def path(node_id: str) -> list[Node]:
        loaded = store.load("story")
        parent = {e.target: e.primary for e in loaded.edges}
        by_id = {n.id: n for n in loaded.nodes}
        out = [by_id[node_id]]
        while out[-1].id in parent:
            out.append(by_id[parent[out[-1].id]])
        return out[::-1]

    def dialogue(node_id: str) -> list[BaseMessage]:
        messages: list[BaseMessage] = []
        for n in path(node_id):
            kind = HumanMessage if n.author_type == "human" else AIMessage
            messages.append(kind(content=n.content, id=n.id))

        def counter(kept: list[BaseMessage]) -> int:
            return sum(counts[str(m.id)] for m in kept)

        kept: list[BaseMessage] = trim_messages(
            messages, max_tokens=AVAILABLE, token_counter=counter, strategy="last"
        )
        return kept

    def buffer(node_id: str) -> str:
        ids = enc.encode_ordinary("".join(n.content for n in path(node_id)))
        return str(enc.decode(ids[-AVAILABLE:]))

    return dialogue, buffer


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=2000, help="nodes in the chain")
    parser.add_argument("--repeat", type=int, default=12, help="timed calls per side and mode")
    args = parser.parse_args(argv)
    tree = build_tree(args.nodes)
    last = f"n{args.nodes - 1}"
    print(f"{platform.python_implementation()} {platform.python_version()}, {os.cpu_count()} CPUs")
    with tempfile.TemporaryDirectory() as tmp:
        store = SQLiteStore(f"{tmp}/loom.db")
        store.save(tree)
        with Loom(store) as loom:
            dialogue, buffer = peer(store, tree)
            modes = {
                "dialogue": (lambda: loom.dialogue("story", last, model="gpt-4o"), dialogue),
                "buffer": (lambda: loom.buffer("story", last, model="gpt-4o"), buffer),
            }
            for mode, (lamina_call, peer_call) in modes.items():
                sides = (lamina_call, lambda peer_call=peer_call: peer_call(last))
                for side in sides:  # untimed: the first call builds what calls share
                    side()
                times: tuple[list[float], list[float]] = ([], [])
                for i in range(args.repeat):
                    for side in (0, 1) if i % 2 else (1, 0):
                        gc.collect()  # neither side pays for the other's garbage
                        started = time.perf_counter()
                        sides[side]()
                        times[side].append(1000 * (time.perf_counter() - started))
                ours, theirs = statistics.median(times[0]), statistics.median(times[1])
                print(
                    f"{mode}, {args.nodes} nodes: Lamina {ours:.1f} ms, hand-rolled "
                    f"{theirs:.1f} ms, Lamina / hand-rolled {ours / theirs:.2f}x"
                )


if __name__ == "__main__":
    main()

"""Loom over a long tree position: ``Loom.dialogue`` and ``Loom.buffer`` against a hand-rolled
host on the same stored tree, in one run.

The tree is a chain of ``--nodes`` nodes (2,000 by default), human and model nodes taking
turns, each about 300 characters of prose: about 130,000 tokens in all, more than gpt-4o's
window less the Loom default response buffer (1,024 tokens), so both modes cut. It is saved
in a ``SQLiteStore`` in a temporary folder. Each side loads the tree from the same store every
call (another window may have changed it); the store hands back the tree it keeps decoded
while no write has changed it.

Two loops, each timed in both modes:

* ``again``: the chain's last node, call after call, as an editor asks for several
  generations from one position;
* ``grow``: before each call (untimed) the editor saves the tree with one more node, and
  the call assembles that node, as after every new node. The save writes the new rows only
  and the store keeps the tree it saved, so neither side decodes it; both walk it afresh.

``--node-metadata`` turns on Loom's node metadata lines (each node's text starts with a line
naming it, its parent and its children); the hand-rolled peer sends none, so the ratio then
says what the lines cost on top of the same work.

Medians of ``--repeat`` calls per side, interleaved, ``gc.collect()`` before each (so neither
side pays for collecting the other's garbage), and their ratio (Lamina / peer).
Run: ``.venv/bin/python bench/bench_loom.py [--nodes 2000] [--repeat 12] [--text source]
[--node-metadata]``
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
from functools import partial
from typing import Any

from attrs import evolve
from cache_shapes import Source
from lamina_loom import Edge, EdgeSource, Loom, Node, SQLiteStore, Tree
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, trim_messages

from lamina import LaminaConfig
from lamina.tokens import load_encoding

#: gpt-4o's window less the Loom default response buffer.
AVAILABLE = 128_000 - 1024


def build_tree(count: int, text: str = "prose") -> Tree:
    """The chain: ``prose`` (about 300 characters a node, the same sentence numbered) or
    ``source`` (about 300 characters of standard-library source a node, whole lines)."""
    prose = "Line {i} of the story, where things happen and then more things happen. "
    source = Source(0) if text == "source" else None
    nodes = [
        Node(
            id=f"n{i}",
            author_type="human" if i % 2 == 0 else "model",
            content=source.take(300) if source else prose.format(i=i) * 4,
        )
        for i in range(count)
    ]
    edges = [
        Edge(id=f"e{i}", target=f"n{i}", sources=(EdgeSource(node=f"n{i - 1}"),))
        for i in range(1, count)
    ]
    return Tree(id="story", nodes=tuple(nodes), edges=tuple(edges))


def peer(
    store: SQLiteStore, tree: Tree
) -> tuple[Callable[[str], Any], Callable[[str], Any], Callable[[Node], None]]:
    """The hand-rolled host's dialogue and buffer calls, and how it counts a new node (once,
    when it arrives)."""
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

    def arrived(node: Node) -> None:
        counts[node.id] = len(enc.encode_ordinary(node.content)) + 4

    return dialogue, buffer, arrived


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=2000, help="nodes in the chain")
    parser.add_argument("--repeat", type=int, default=12, help="timed calls per side and mode")
    parser.add_argument(
        "--text",
        choices=("prose", "source"),
        default="prose",
        help="what the nodes hold: numbered prose (default) or standard-library source",
    )
    parser.add_argument(
        "--node-metadata",
        action="store_true",
        help="Loom's node metadata lines on (the peer sends none)",
    )
    args = parser.parse_args(argv)
    # The chain, and the nodes the grow loop adds after it (made of the same text).
    pool = build_tree(args.nodes + 4 * args.repeat + 8, args.text)
    tree = evolve(pool, nodes=pool.nodes[: args.nodes], edges=pool.edges[: args.nodes - 1])
    print(f"{platform.python_implementation()} {platform.python_version()}, {os.cpu_count()} CPUs")
    with tempfile.TemporaryDirectory() as tmp:
        store = SQLiteStore(f"{tmp}/loom.db")
        store.save(tree)
        config = LaminaConfig()
        config = evolve(config, budget=evolve(config.budget, reserve_tools=0))  # (Loom's own)
        if args.node_metadata:
            config = evolve(config, sections={"loom": {"node_metadata": True}})
        with Loom(store, config=config) as loom:
            dialogue, buffer, arrived = peer(store, tree)
            grown = [tree]

            def grow() -> str:
                """Save the tree with one more node (the editor's own write); its id."""
                last = grown[-1]
                n = len(last.nodes)
                node = pool.nodes[n]
                edge = Edge(id=f"e{n}", target=node.id, sources=(EdgeSource(node=f"n{n - 1}"),))
                grown.append(evolve(last, nodes=(*last.nodes, node), edges=(*last.edges, edge)))
                store.save(grown[-1])
                arrived(node)
                return node.id

            modes = {
                "dialogue": (partial(loom.dialogue, "story", model="gpt-4o"), dialogue),
                "buffer": (partial(loom.buffer, "story", model="gpt-4o"), buffer),
            }
            for loop in ("again", "grow"):
                for mode, (lamina_call, peer_call) in modes.items():
                    sides = (lamina_call, peer_call)
                    for side in sides:  # untimed: the first call builds what calls share
                        side(f"n{len(grown[-1].nodes) - 1}")
                    times: tuple[list[float], list[float]] = ([], [])
                    for i in range(args.repeat):
                        node_id = grow() if loop == "grow" else f"n{len(grown[-1].nodes) - 1}"
                        for side in (0, 1) if i % 2 else (1, 0):
                            gc.collect()  # neither side pays for the other's garbage
                            started = time.perf_counter()
                            sides[side](node_id)
                            times[side].append(1000 * (time.perf_counter() - started))
                    ours, theirs = statistics.median(times[0]), statistics.median(times[1])
                    print(
                        f"{loop}, {mode}, {len(grown[-1].nodes)} nodes: Lamina {ours:.1f} ms, "
                        f"hand-rolled {theirs:.1f} ms, Lamina / hand-rolled {ours / theirs:.2f}x"
                    )


if __name__ == "__main__":
    main()

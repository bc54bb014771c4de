"""The Cortex draft's injection formats for memory: ``raw`` (each memory's text, one per line),
``summary`` (each memory cut to its first sentence, at most ``SUMMARY_WORDS`` words, so more of
them fit) and ``structured`` (one JSON object per line: id, kind, time, score and text).

A format is applied to the candidates before selection, so the budget is spent on the text as
it will be injected. ``[plugins.memory] format`` sets it for the whole layer, ``formats`` per
source (``recent``, ``semantic``, ``entities``, ``relations``, ``patterns``).
"""

from __future__ import annotations

import json
import re

from attrs import evolve

from lamina_memory.records import Candidate

FORMATS = ("raw", "summary", "structured")
#: The words a ``summary`` item keeps at most.
SUMMARY_WORDS = 24
_SENTENCE_END = re.compile(r"(?<=[.!?])\s")


def summarize(text: str, words: int = SUMMARY_WORDS) -> str:
    """The first sentence of ``text``, cut to ``words`` words (an ellipsis marks a cut); never
    empty when ``text`` is not."""
    first = _SENTENCE_END.split(text.strip(), maxsplit=1)[0]
    parts = first.split()
    if len(parts) > words:
        return " ".join(parts[:words]) + " …"
    return first if len(first) == len(text.strip()) else first + " …"


def structured(c: Candidate) -> str:
    """One JSON object on one line: what the memory is, when, how it scored, and its text."""
    data: dict[str, object] = {"id": c.source_id or c.key, "kind": c.kind}
    if c.time is not None:
        data["time"] = c.time.isoformat()
    data["relevance"] = round(c.relevance, 3)
    data["text"] = c.text
    return json.dumps(data, ensure_ascii=False)


def formatted(c: Candidate, fmt: str) -> Candidate:
    """``c`` with its line in ``fmt``."""
    if fmt == "summary":
        return evolve(c, text=summarize(c.text))
    if fmt == "structured":
        return evolve(c, text=structured(c))
    return c


def apply_formats(
    found: dict[str, list[Candidate]], default: str, per_source: dict[str, str]
) -> dict[str, list[Candidate]]:
    """Every source's candidates in its format (``per_source``, else ``default``)."""
    out = {}
    for source, cands in found.items():
        fmt = per_source.get(source, default)
        out[source] = cands if fmt == "raw" else [formatted(c, fmt) for c in cands]
    return out

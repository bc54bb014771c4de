"""LoCoMo for ``bench_memory.py``: the conversations (``../shared/data/locomo/locomo-dev.json``,
override: ``LAMINA_LOCOMO``; evaluation only, never copied into the repository), each one's dialog
turns as memory chunks (``Speaker: text``), the questions' evidence ids, and the turns' MiniLM
vectors, kept in ``LAMINA_BENCH_CACHE`` between runs.
"""

from __future__ import annotations

import json
import os
import re
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from lamina_memory.records import Chunk

ROOT = Path(__file__).resolve().parent.parent
DATA = Path(
    os.environ.get("LAMINA_LOCOMO", ROOT.parent / "shared" / "data" / "locomo" / "locomo-dev.json")
)
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}


def load() -> list[dict[str, Any]]:
    if not DATA.is_file():
        sys.exit(f"LoCoMo data not found at {DATA} (set LAMINA_LOCOMO)")
    data: list[dict[str, Any]] = json.loads(DATA.read_text("utf-8"))
    return data


def session_time(raw: str) -> datetime | None:
    """``1:56 pm on 8 May, 2023`` → an aware datetime (UTC), or None."""
    try:
        return datetime.strptime(raw.strip(), "%I:%M %p on %d %B, %Y").replace(tzinfo=UTC)
    except ValueError:
        return None


def turns(sample: dict[str, Any]) -> list[Chunk]:
    conv = sample["conversation"]
    out = []
    keys = sorted(
        (k for k in conv if re.fullmatch(r"session_\d+", k)), key=lambda k: int(k.split("_")[1])
    )
    for key in keys:
        when = session_time(conv.get(f"{key}_date_time", ""))
        for t in conv[key]:
            out.append(
                Chunk(id=t["dia_id"], text=f"{t['speaker']}: {t['text']}", time=when, session=key)
            )
    return out


def evidence(raw: list[str], known: set[str]) -> set[str]:
    """Normalise LoCoMo's evidence ids (``D8:6; D9:17``, ``D:11:26``, ``D30:05``)."""
    out = set()
    for item in raw:
        for part in re.split(r"[;,\s]+", item):
            m = re.fullmatch(r"D:?(\d+):0*(\d+)", part.strip())
            if m:
                dia = f"D{m.group(1)}:{m.group(2)}"
                if dia in known:
                    out.add(dia)
    return out


CACHE = Path(os.environ.get("LAMINA_BENCH_CACHE", Path.home() / ".cache" / "lamina-bench"))


def embed_cached(texts: list[str]) -> Any:
    """MiniLM vectors of ``texts``, kept in ``LAMINA_BENCH_CACHE`` (by the texts' hash) so
    repeated runs do not embed the same turns again."""
    import hashlib

    import numpy as np
    from lamina_memory.embedders import get_embedder

    key = hashlib.sha256("\x00".join(texts).encode("utf-8")).hexdigest()[:24]
    path = CACHE / f"minilm-{key}.npy"
    if path.is_file():
        return np.load(path)
    vecs = get_embedder("minilm").embed(texts)
    CACHE.mkdir(parents=True, exist_ok=True)
    np.save(path, vecs)
    return vecs


def embed_all(samples: list[dict[str, Any]]) -> dict[str, list[Chunk]]:
    """Every conversation's turns with MiniLM embeddings (computed once for all variants)."""
    out = {}
    for s in samples:
        chunks = turns(s)
        vecs = embed_cached([c.text for c in chunks])
        out[s["sample_id"]] = [
            Chunk(
                id=c.id,
                text=c.text,
                time=c.time,
                session=c.session,
                embedding=tuple(float(x) for x in v),
            )
            for c, v in zip(chunks, vecs, strict=True)
        ]
    return out


def timed_query(svc: Any, question: str, tokenizer: Any) -> float:
    """Seconds one retrieval of ``question`` takes (1,024 tokens, markdown, no permissions),
    as both latency benchmarks time it."""
    from lamina_memory.retrieval import Filters

    started = time.perf_counter()
    svc.retrieve(
        text=question,
        session="locomo",
        now=datetime(2026, 1, 1, tzinfo=UTC),
        who=frozenset(),
        filters=Filters(),
        budget=1024,
        tokenizer=tokenizer,
        fmt="markdown",
    )
    return time.perf_counter() - started

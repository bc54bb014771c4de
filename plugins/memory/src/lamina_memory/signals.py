"""Query signals of the memory framework design: keywords, mentioned entities, intent, relevant event types.

Also the lexical analyser BM25 and keyword matching share: lower-cased words, English stop
words dropped, Snowball (Porter 2) stems through PyStemmer.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterable, Sequence
from typing import Any

from attrs import frozen

from lamina import ConfigError

_WORD = re.compile(r"[^\W_]+(?:'[^\W_]+)?", re.UNICODE)
_STOP_TEXT = """
a about above after again against all am an and any are aren't as at be because been
before being below between both but by can can't cannot could couldn't did didn't do does
doesn't doing don't down during each few for from further had hadn't has hasn't have
haven't having he he'd he'll he's her here here's hers herself him himself his how how's i
i'd i'll i'm i've if in into is isn't it it's its itself let's me more most mustn't my
myself no nor not of off on once only or other ought our ours ourselves out over own same
shan't she she'd she'll she's should shouldn't so some such than that that's the their
theirs them themselves then there there's these they they'd they'll they're they've this
those through to too under until up very was wasn't we we'd we'll we're we've were weren't
what what's when when's where where's which while who who's whom why why's with won't
would wouldn't you you'd you'll you're you've your yours yourself yourselves s t just also
will yes oh hey
"""
STOPWORDS = frozenset(_STOP_TEXT.split())
_STEMMERS = threading.local()


def _stemmer() -> Any:
    """This thread's Snowball English stemmer (PyStemmer objects are not shared by threads)."""
    found = getattr(_STEMMERS, "english", None)
    if found is None:
        try:
            import Stemmer  # type: ignore[import-not-found]
        except ImportError as exc:  # a dependency of lamina-memory: only a broken install
            raise ConfigError(
                "plugin 'memory': BM25 needs the Snowball stemmer of the PyStemmer package, "
                "which is not installed: pip install PyStemmer (a dependency of lamina-memory)",
                key="plugins.memory",
            ) from exc
        found = _STEMMERS.english = Stemmer.Stemmer("english")
    return found


def stem(word: str) -> str:
    """Snowball (Porter 2) English stem: ``running``→``run``, ``caring``→``care``."""
    result: str = _stemmer().stemWord(word)
    return result


def stems(terms: list[str]) -> list[str]:
    """Snowball stems of ``terms``, in one call."""
    result: list[str] = _stemmer().stemWords(terms)
    return result


def words(text: str) -> list[str]:
    """Lower-cased words of ``text``, apostrophe contractions kept whole."""
    return [w.lower().replace("’", "'") for w in _WORD.findall(text.replace("’", "'"))]


def analyse(text: str) -> list[str]:
    """The terms BM25 indexes: words minus stop words, stemmed."""
    return stems([w for w in words(text) if w not in STOPWORDS])


_INTENTS: tuple[tuple[str, re.Pattern[str]], ...] = (
    (
        "fix",
        re.compile(r"\b(fix|bug|error|broken|fails?|failing|crash\w*|debug|traceback)\b", re.I),
    ),
    ("explain", re.compile(r"\b(explain|why|how does|what does|describe|meaning of)\b", re.I)),
    (
        "action",
        re.compile(
            r"^\s*(please\s+)?(add|create|make|write|run|deploy|update|change|remove|delete|"
            r"implement|build|install|set|send|open|move|rename)\b",
            re.I,
        ),
    ),
    (
        "question",
        re.compile(
            r"\?\s*$|^\s*(who|what|when|where|which|whom|whose|how|is|are|do|does|did|can|could|"
            r"would|will|should|has|have)\b",
            re.I,
        ),
    ),
)

#: Event types that matter most to each intent (the memory framework design's "relevant event types").
INTENT_EVENT_TYPES: dict[str, tuple[str, ...]] = {
    "fix": ("error", "tool_result", "test", "fix"),
    "action": ("tool_call", "tool_result", "decision"),
    "explain": ("decision", "note", "message"),
    "question": ("message", "note", "decision"),
    "other": (),
}


def intent_of(text: str) -> str:
    """question, action, fix, explain or other, by the first rule that matches."""
    for name, pattern in _INTENTS:
        if pattern.search(text):
            return name
    return "other"


@frozen(kw_only=True)
class QuerySignals:
    """What retrieval looks for in one request."""

    text: str
    keywords: tuple[str, ...]
    entities: tuple[str, ...]
    intent: str
    event_types: tuple[str, ...]
    embedding: tuple[float, ...] | None = None


def mentioned(text: str, names: Iterable[str]) -> tuple[str, ...]:
    """The entity names that occur in ``text`` as whole words (case-insensitive), in order."""
    low = f" {' '.join(words(text))} "
    found = []
    for name in names:
        key = " ".join(words(name))
        if key and f" {key} " in low and name not in found:
            found.append(name)
    return tuple(found)


def extract(
    text: str, entity_names: Sequence[str], embedding: tuple[float, ...] | None = None
) -> QuerySignals:
    """Signals from the current message (plus entity names known to the store)."""
    keys = list(dict.fromkeys(analyse(text)))
    intent = intent_of(text)
    return QuerySignals(
        text=text,
        keywords=tuple(keys),
        entities=mentioned(text, entity_names),
        intent=intent,
        event_types=INTENT_EVENT_TYPES[intent],
        embedding=embedding,
    )

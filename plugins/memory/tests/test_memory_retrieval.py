"""Signals, sources, scoring and greedy selection, on hand-made data with hand-computed answers."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from lamina_memory.index import ChunkIndex, Lexical, Snapshot
from lamina_memory.records import Candidate, Chunk, Entity, EpisodicEvent, Pattern, Relation
from lamina_memory.retrieval import (
    Filters,
    Query,
    recency,
    source_entities,
    source_patterns,
    source_recent,
    source_relations,
    source_semantic,
)
from lamina_memory.selection import score, select
from lamina_memory.semantic import _spread_in_memory, spread
from lamina_memory.settings import Settings
from lamina_memory.signals import extract, intent_of, stem

NOW = datetime(2026, 1, 2, 12, 0, tzinfo=UTC)


def snap(**kinds: list) -> Snapshot:
    return Snapshot(
        version=1,
        events=kinds.get("events", []),
        chunks=kinds.get("chunks", []),
        entities=kinds.get("entities", []),
        relations=kinds.get("relations", []),
        patterns=kinds.get("patterns", []),
    )


def query(s: Snapshot, text: str, *, who: frozenset[str] = frozenset(), **kw: object) -> Query:
    settings = Settings(**kw)  # type: ignore[arg-type]
    return Query(
        signals=extract(text, [e.name for e in s.entities]),
        session="s1",
        now=NOW,
        who=who,
        filters=Filters(),
        settings=settings,
    )


def test_intent_and_stemming() -> None:
    assert intent_of("Fix the failing test") == "fix"
    assert intent_of("Why does the cache miss?") == "explain"
    assert intent_of("Deploy staging now") == "action"
    assert intent_of("Where is the config?") == "question"
    assert intent_of("nice weather") == "other"
    assert stem("running") == "run"
    assert stem("deployments") == "deploy"  # Snowball
    assert stem("stories") == "stori"
    assert stem("cat") == "cat"


def test_signals_find_mentioned_entities_as_whole_words() -> None:
    sig = extract("Did Ann meet Annabel at the Staging Server?", ["Ann", "Bob", "staging server"])
    assert sig.entities == ("Ann", "staging server")
    assert sig.intent == "question"
    assert "meet" in sig.keywords and "the" not in sig.keywords


def test_recency_halves_every_half_life() -> None:
    assert recency(NOW, NOW, 24) == 1.0
    assert recency(NOW - timedelta(hours=24), NOW, 24) == 0.5
    assert recency(NOW - timedelta(hours=72), NOW, 24) == 0.125
    assert recency(NOW - timedelta(hours=6), NOW, 6) == 0.5
    assert recency(None, NOW, 24) == 0.0


def test_weighted_score() -> None:
    c = Candidate(
        key="k", source="semantic", section="S", text="x", relevance=0.5, recency=1.0, salience=0.0
    )
    assert score(c, (0.3, 0.5, 0.2)) == 0.3 * 1.0 + 0.5 * 0.5
    assert Settings(strategy="recency").score_weights == pytest.approx((0.6, 0.3, 0.1))
    assert Settings(weights=(1.0, 1.0, 2.0)).score_weights == (0.25, 0.25, 0.5)


def test_bm25_ranks_the_matching_chunk_first_and_scores_a_streamed_tail() -> None:
    lex = Lexical(["the cat sat on the mat", "dogs chase cats", "weather report for today"])
    scores = lex.scores(["weather"])
    assert scores[2] > 0 and scores[0] == 0 and scores[1] == 0
    lex = lex.folded(appended=["tomorrow's weather looks grim"])
    scores = lex.scores(["weather"])
    assert len(scores) == 4 and scores[3] > 0 and scores[0] == 0
    lex = lex.folded(replaced={0: "the weather on the mat"})  # an indexed chunk re-added
    scores = lex.scores(["weather"])
    assert len(scores) == 4 and scores[0] > 0 and lex.unindexed == 2


def test_semantic_source_filters_by_acl_since_and_exclusions() -> None:
    chunks = [
        Chunk(id="pub", text="deploy staging with make"),
        Chunk(id="ann", text="deploy staging secret token", acl=("user:ann",)),
        Chunk(id="old", text="deploy staging old notes", time=NOW - timedelta(days=30)),
        Chunk(id="gone", text="deploy staging excluded"),
    ]
    s = snap(chunks=chunks)
    q = query(s, "how to deploy staging")
    q = Query(
        signals=q.signals,
        session="s1",
        now=NOW,
        who=frozenset(),
        settings=q.settings,
        filters=Filters(since=NOW - timedelta(days=1), exclude_ids=frozenset({"gone"})),
    )
    assert {c.source_id for c in source_semantic(s, q)} == {"pub"}
    q_ann = Query(
        signals=q.signals,
        session="s1",
        now=NOW,
        who=frozenset({"user:ann"}),
        settings=q.settings,
        filters=Filters(),
    )
    assert {c.source_id for c in source_semantic(s, q_ann)} == {"pub", "ann", "old", "gone"}


def test_neighbouring_turns_are_added_at_half_the_score() -> None:
    chunks = [
        Chunk(id="1", text="A: what are you reading", session="x"),
        Chunk(id="2", text="B: a novel about whales", session="x"),
        Chunk(id="3", text="A: sounds great", session="x"),
        Chunk(id="4", text="B: unrelated", session="y"),
    ]
    s = snap(chunks=chunks)
    plain = {
        c.source_id: c.relevance for c in source_semantic(s, query(s, "whales novel", neighbours=0))
    }
    assert plain == {"2": 1.0}
    wide = {
        c.source_id: c.relevance for c in source_semantic(s, query(s, "whales novel", neighbours=1))
    }
    assert wide == {"2": 1.0, "1": 0.5, "3": 0.5}


def test_a_turn_between_two_hits_gains_from_both() -> None:
    chunks = [
        Chunk(id="1", text="A: whales novel", session="x"),
        Chunk(id="2", text="B: tell me more", session="x"),
        Chunk(id="3", text="A: whales novel", session="x"),
        Chunk(id="4", text="B: lovely", session="x"),
        Chunk(id="5", text="A: whales novel", session="y"),
    ]
    s = snap(chunks=chunks)
    found = source_semantic(s, query(s, "whales novel", neighbours=1))
    # equal BM25, so reciprocal ranks 1/6, 1/7, 1/8 (ties by position): 1.0, 6/7, 6/8. Turn 2
    # neighbours two hits (half of each), 4 only one; the other session's hit lends nothing.
    assert {c.source_id: c.relevance for c in found} == pytest.approx(
        {"1": 1.0, "2": 0.5 + 3 / 7, "3": 6 / 7, "4": 3 / 7, "5": 0.75}
    )


def test_spread_adds_each_hits_share_by_distance_and_keeps_the_best() -> None:
    hits = {"a": 1.0, "b": 0.5}
    around = [("a", "b", 1), ("a", "c", 2), ("a", "d", 3), ("b", "c", 1)]
    place = "abcd".index
    # a: 1.0; b: 0.5 + 1.0 × 0.5; c: 1.0 × 0.5 / 2 + 0.5 × 0.5; d: 1.0 × 0.5 / 3
    assert spread(hits, around, 0.5, limit=10, place=place) == pytest.approx(
        {"a": 1.0, "b": 1.0, "c": 0.5, "d": 1 / 6}
    )
    # the limit keeps the best, ties by place (a before b), and rescales by the best kept
    assert list(spread(hits, around, 0.5, limit=2, place=place)) == ["a", "b"]
    assert spread({"a": 0.8}, [], 0.5, limit=1, place=place) == pytest.approx({"a": 1.0})


@settings(max_examples=60, deadline=None)
@given(
    sessions=st.lists(st.sampled_from("xyz"), min_size=1, max_size=30),
    hidden=st.sets(st.integers(0, 29)),
    neighbours=st.integers(0, 3),
    limit=st.integers(1, 40),
    data=st.data(),
)
def test_the_in_memory_spread_sums_as_spread_does(
    sessions: list[str], hidden: set[int], neighbours: int, limit: int, data: st.DataObject
) -> None:
    """The snapshot's array version (the store's path calls ``spread``) gives the same scores
    in the same order, so both backends rank alike."""
    import numpy as np

    n = len(sessions)
    idx = ChunkIndex([Chunk(id=str(i), text="x", session=v) for i, v in enumerate(sessions)])
    mask = np.array([i not in hidden for i in range(n)])
    visible = [i for i in range(n) if mask[i]]
    if not visible:
        return
    order = data.draw(st.lists(st.sampled_from(visible), min_size=1, unique=True))
    raw = sorted(
        data.draw(st.lists(st.floats(0.01, 1.0), min_size=len(order), max_size=len(order))),
        reverse=True,
    )
    scores = np.array(raw) / raw[0]
    settings_ = Settings(neighbours=neighbours, neighbour_weight=0.5, semantic_limit=limit)
    q = Query(
        signals=extract("x", []),
        session="s",
        now=NOW,
        who=frozenset(),
        filters=Filters(),
        settings=settings_,
    )
    around = [
        (i, j, d)
        for i in order
        for d in range(1, neighbours + 1)
        for j in (i - d, i + d)
        if 0 <= j < n and mask[j] and sessions[j] == sessions[i]
    ]
    hits = {i: float(v) for i, v in zip(order, scores, strict=True)}
    expected = spread(hits, around, 0.5, limit=limit, place=int)
    got = _spread_in_memory(idx, mask, order, scores, q)
    assert list(got) == list(expected)
    assert got == expected


def test_recent_source_takes_this_session_and_highlights_of_others() -> None:
    ev = [
        EpisodicEvent(
            id="a", type="message", text="mine", time=NOW - timedelta(hours=24), session="s1"
        ),
        EpisodicEvent(
            id="b", type="message", text="other dull", time=NOW, session="s2", salience=0.2
        ),
        EpisodicEvent(
            id="c", type="decision", text="other key", time=NOW, session="s2", salience=0.9
        ),
        EpisodicEvent(
            id="d",
            type="error",
            text="other failed",
            time=NOW,
            session="s3",
            salience=0.1,
            outcome="failure",
        ),
    ]
    s = snap(events=ev)
    got = {c.source_id: c for c in source_recent(s, query(s, "anything"))}
    assert set(got) == {"a", "c", "d"}
    assert got["a"].recency == 0.5 and got["c"].recency == 1.0
    assert got["d"].text.endswith("other failed → failure")
    only = Query(
        signals=extract("x", []),
        session="s1",
        now=NOW,
        who=frozenset(),
        settings=Settings(),
        filters=Filters(event_types=("decision",)),
    )
    assert [c.source_id for c in source_recent(s, only)] == ["c"]


def test_entities_mentioned_count_double_and_salient_ones_join() -> None:
    ents = [
        Entity(id="1", type="person", name="Ann", salience=0.4),
        Entity(id="2", type="person", name="Bob", salience=0.9),
        Entity(id="3", type="place", name="Oslo", salience=0.3),
    ]
    s = snap(entities=ents)
    got = {
        c.source_id: c.salience
        for c in source_entities(s, query(s, "where is Ann", salient_entities=1))
    }
    assert got == {"1": 0.8, "2": 0.9}
    typed = Query(
        signals=extract("where is Ann", ["Ann", "Bob", "Oslo"]),
        session="s1",
        now=NOW,
        who=frozenset(),
        settings=Settings(),
        filters=Filters(entity_types=("place",)),
    )
    assert [c.source_id for c in source_entities(s, typed)] == ["3"]


def test_relations_breadth_first_to_the_depth_limit() -> None:
    ents = [Entity(id=x, type="t", name=x.upper()) for x in "abcd"]
    rels = [
        Relation(id="ab", source="a", target="b", type="knows", weight=0.8),
        Relation(id="bc", source="b", target="c", type="knows", weight=0.8),
        Relation(id="cd", source="c", target="d", type="knows", weight=0.8),
    ]
    s = snap(entities=ents, relations=rels)
    got = {c.source_id: c.relevance for c in source_relations(s, query(s, "tell me about A"))}
    assert got == {"ab": 0.8, "bc": 0.4}
    deep = {c.source_id for c in source_relations(s, query(s, "A", relation_depth=3))}
    assert deep == {"ab", "bc", "cd"}
    texts = [c.text for c in source_relations(s, query(s, "A", relation_depth=1))]
    assert texts == ["A —knows→ B"]


def test_patterns_match_keywords_or_intent_and_rank_by_success() -> None:
    pats = [
        Pattern(
            id="good", text="use make deploy", keywords=("deploy",), successes=9, applications=9
        ),
        Pattern(id="bad", text="ssh and copy", keywords=("deploy",), successes=0, applications=9),
        Pattern(id="fix", text="rerun with -x", intent="fix"),
        Pattern(id="none", text="unrelated", keywords=("cooking",)),
    ]
    s = snap(patterns=pats)
    got = {c.source_id: c.relevance for c in source_patterns(s, query(s, "deploy the site"))}
    assert set(got) == {"good", "bad"}
    assert got["good"] == 10 / 11 and got["bad"] == 1 / 11
    fixing = {c.source_id for c in source_patterns(s, query(s, "fix the failing build"))}
    assert fixing == {"fix"}


def cand(key: str, source: str, relevance: float) -> Candidate:
    return Candidate(
        key=key, source=source, section=source, text=key, relevance=relevance, salience=0.0
    )


def test_selection_gives_each_source_its_share_then_fills_by_score() -> None:
    found = {
        "semantic": [cand(f"s{i}", "semantic", 0.9 - i * 0.01) for i in range(10)],
        "patterns": [cand("p0", "patterns", 0.1)],
    }
    sel = select(
        found,
        budget=50,
        shares={"semantic": 0.8, "patterns": 0.2},
        weights=(0, 1, 0),
        cost=lambda c, first: 10,
    )
    # semantic's share is 40 tokens (4 items), patterns' 10 (its one item); nothing is left.
    assert [c.key for c in sel.chosen] == ["s0", "s1", "s2", "s3", "p0"]
    assert sel.used == 50
    assert [c.key for c in sel.overflow] == ["s4", "s5", "s6", "s7", "s8", "s9"]
    # with no patterns the leftover goes to the best remaining semantic items
    sel2 = select(
        {"semantic": found["semantic"]},
        budget=50,
        shares={"semantic": 0.8},
        weights=(0, 1, 0),
        cost=lambda c, first: 10,
    )
    assert [c.key for c in sel2.chosen] == ["s0", "s1", "s2", "s3", "s4"]


def test_selection_skips_what_does_not_fit_and_takes_smaller_items() -> None:
    found = {"semantic": [cand("big", "semantic", 0.9), cand("small", "semantic", 0.5)]}
    sizes = {"big": 30, "small": 5}
    sel = select(
        found,
        budget=20,
        shares={"semantic": 1.0},
        weights=(0, 1, 0),
        cost=lambda c, first: sizes[c.key],
    )
    assert [c.key for c in sel.chosen] == ["small"]
    assert [c.key for c in sel.overflow] == ["big"]


@settings(max_examples=60, deadline=None)
@given(
    sizes=st.lists(st.integers(min_value=1, max_value=60), min_size=0, max_size=30),
    rels=st.lists(st.floats(min_value=0, max_value=1), min_size=30, max_size=30),
    budget=st.integers(min_value=0, max_value=400),
    share=st.floats(min_value=0, max_value=1),
)
def test_selection_never_exceeds_the_budget_and_loses_nothing(
    sizes: list[int], rels: list[float], budget: int, share: float
) -> None:
    cands = [cand(f"k{i}", "semantic" if i % 2 else "recent", rels[i]) for i in range(len(sizes))]
    found = {
        "semantic": [c for c in cands if c.source == "semantic"],
        "recent": [c for c in cands if c.source == "recent"],
    }
    size = {c.key: sizes[i] for i, c in enumerate(cands)}
    sel = select(
        found,
        budget=budget,
        shares={"semantic": share, "recent": 1 - share},
        weights=(0, 1, 0),
        cost=lambda c, first: size[c.key],
    )
    assert sel.used == sum(size[c.key] for c in sel.chosen) <= budget
    assert {c.key for c in sel.chosen} | {c.key for c in sel.overflow} == set(size)
    assert not {c.key for c in sel.chosen} & {c.key for c in sel.overflow}
    # anything left over was too big for what remained
    assert all(size[c.key] > budget - sel.used for c in sel.overflow)


def test_neighbour_weight_sets_the_neighbours_share_of_the_score() -> None:
    chunks = [
        Chunk(id="1", text="A: what are you reading", session="x"),
        Chunk(id="2", text="B: a novel about whales", session="x"),
        Chunk(id="3", text="A: sounds great", session="x"),
        Chunk(id="4", text="B: lovely", session="x"),
    ]
    s = snap(chunks=chunks)
    found = source_semantic(s, query(s, "whales novel", neighbours=2, neighbour_weight=0.8))
    assert {c.source_id: c.relevance for c in found} == pytest.approx(
        {"2": 1.0, "1": 0.8, "3": 0.8, "4": 0.4}
    )

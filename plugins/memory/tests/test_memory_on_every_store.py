"""Promises that hold on every store (in-memory SQLite, an SQLite file and a real PostgreSQL):
re-adding a memory replaces it in the running service's live index (a revoked ACL and a new
text reach the very next assembly), content a store cannot hold is refused whole with the
memory and field named, and awkward content that it can hold round-trips exactly."""

from __future__ import annotations

import subprocess
import sys
import threading
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule
from lamina_memory.query import Filters
from lamina_memory.records import Chunk, Entity, EpisodicEvent
from lamina_memory.service import MemoryService
from lamina_memory.settings import Settings
from lamina_memory.store import MemoryStoreError, open_store

from lamina import LaminaConfig
from lamina.testing import FakeTokenizer
from lamina.testing.postgres import fresh_database

FILLER = [Chunk(id=f"f{i}", text=f"note {i} about the lunch menu") for i in range(20)]
STORES = ["memory", "sqlite", "postgresql"]


def new_store_url(kind: str, tmp: Path, request: pytest.FixtureRequest) -> str:
    """A fresh, empty store of one kind."""
    if kind == "memory":
        return "memory:"
    if kind == "sqlite":
        return f"sqlite:///{tmp}/memory-{len(list(tmp.iterdir()))}.db"
    return fresh_database(request.getfixturevalue("postgres_dsn"), extensions=("vector",))


@pytest.fixture(params=STORES)
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return new_store_url(request.param, tmp_path, request)


def memory_of(asm: Any, text: str, **fields: Any) -> str:
    ctx = asm.assemble(asm.request(text, **fields))
    return str(ctx.current_message.text.split("Current time:")[0])


# -- re-adding replaces -------------------------------------------------------------------


@pytest.mark.parametrize("cache_ttl", [0, 30])
def test_revoking_access_reaches_the_running_service(
    make: Any, store_url: str, cache_ttl: int
) -> None:
    asm, svc = make({"store": store_url, "cache_ttl": cache_ttl})
    svc.add([*FILLER, Chunk(id="plan", text="the launch plan is kept in the vault")])
    assert "launch plan is kept in the vault" in memory_of(asm, "where is the launch plan?")

    svc.add([Chunk(id="plan", text="the launch plan moved to the safe", acl=("ops",))])

    anon = memory_of(asm, "where is the launch plan, vault or safe?")
    assert "vault" not in anon and "safe" not in anon
    ops = memory_of(asm, "where is the launch plan, vault or safe?", permissions=("ops",))
    assert "the launch plan moved to the safe" in ops and "vault" not in ops


def test_granting_access_reaches_the_running_service(make: Any, store_url: str) -> None:
    asm, svc = make({"store": store_url, "cache_ttl": 0})
    svc.add([*FILLER, Chunk(id="plan", text="the launch plan is in the vault", acl=("ops",))])
    assert "vault" not in memory_of(asm, "where is the launch plan?")
    svc.add([Chunk(id="plan", text="the launch plan is in the vault")])
    assert "launch plan is in the vault" in memory_of(asm, "where is the launch plan?")


def test_a_replaced_chunk_keeps_its_place_and_is_found_by_its_new_words(
    make: Any, store_url: str
) -> None:
    asm, svc = make({"store": store_url, "cache_ttl": 0})
    svc.add([*FILLER, Chunk(id="plan", text="the launch plan is in the vault")])
    first = svc.snapshot()
    svc.add([Chunk(id="f3", text="the quarterly budget spreadsheet")])
    assert svc.snapshot() is first  # folded into the live index, not rebuilt
    if first.chunks_in_store:  # PostgreSQL searches them itself: the snapshot holds none
        assert first.chunks == ()
    else:
        ids = [c.id for c in first.chunks]
        assert ids == [c.id for c in svc.store.chunks()] and ids.count("f3") == 1
    assert "quarterly budget" in memory_of(asm, "quarterly budget")
    assert "note 3 about" not in memory_of(asm, "lunch menu note 3")


def test_a_reader_never_sees_a_revoked_text_while_it_is_rewritten(make: Any) -> None:
    """Queries racing re-adds read one consistent view: never the restricted text under the
    open ACL (threads: the live index is in-process)."""
    _asm, svc = make({"cache_ttl": 0})
    svc.add(FILLER)
    svc.snapshot()
    done = threading.Event()
    leaks: list[str] = []

    def writer() -> None:
        for i in range(150):
            if i % 2:
                svc.add([Chunk(id="plan", text=f"secret plan revision {i}", acl=("ops",))])
            else:
                svc.add([Chunk(id="plan", text=f"public plan revision {i}")])
        done.set()

    def reader() -> None:
        while not done.is_set():
            selection, _ = retrieve(svc, "plan revision secret public", who=frozenset())
            leaks.extend(c.text for c in selection.chosen if "secret" in c.text)

    threads = [threading.Thread(target=writer), threading.Thread(target=reader)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert leaks == []


def retrieve(svc: MemoryService, text: str, *, who: frozenset[str]) -> Any:
    return svc.retrieve(
        text=text,
        session="s",
        now=datetime(2026, 1, 1, tzinfo=UTC),
        who=who,
        filters=Filters(),
        budget=100_000,
        tokenizer=FakeTokenizer(),
        fmt="plain",
    )


#: A writer in another process: adds its chunks one write at a time, then (the last
#: writer) re-adds ``plan`` restricted to ``ops``.
WRITER = """
import sys
from lamina_memory.records import Chunk
from lamina_memory.store import open_store

url, worker, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
store = open_store(url)
for i in range(n):
    store.add([Chunk(id=f"w{worker}-{i}", text=f"worker {worker} wrote note {i}")])
if worker == 0:
    store.add([Chunk(id="plan", text="the launch plan moved to the safe", acl=("ops",))])
store.close()
"""


@pytest.mark.parametrize("kind", ["sqlite", "postgresql"])
def test_writers_in_other_processes_lose_nothing_and_a_live_service_follows(
    make: Any, kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    url = new_store_url(kind, tmp_path, request)
    asm, svc = make({"store": url, "cache_ttl": 0})
    svc.add([*FILLER, Chunk(id="plan", text="the launch plan is kept in the vault")])
    assert "vault" in memory_of(asm, "where is the launch plan?")
    writers = [
        subprocess.Popen([sys.executable, "-c", WRITER, url, str(w), "25"], stderr=subprocess.PIPE)
        for w in range(4)
    ]
    for w in writers:
        _, err = w.communicate()
        assert w.returncode == 0, err.decode()
    assert svc.store.version() == 1 + 4 * 25 + 1  # every write acknowledged, none lost
    ids = [c.id for c in svc.store.chunks()]
    assert len(ids) == len(set(ids)) == 21 + 4 * 25
    assert "vault" not in memory_of(asm, "where is the launch plan, vault or safe?")
    assert "safe" in memory_of(asm, "where is the launch plan?", permissions=("ops",))
    assert "worker 3 wrote note 24" in memory_of(asm, "worker 3 wrote note 24")


WORDS = ["alpha", "bravo", "charlie", "delta"]
ACLS: list[tuple[str, ...]] = [(), ("ops",), ("user:ann",)]
CALLERS = [frozenset(), frozenset({"ops"}), frozenset({"user:ann", "ops"})]


class LiveIndex(RuleBasedStateMachine):
    """Writes through the service (chunks folded in, other kinds rebuilding) and queries as
    several callers: every answer matches a model of what was last written under each id."""

    url = "memory:"

    def __init__(self) -> None:
        super().__init__()
        self.svc = MemoryService(Settings(store=self.url, cache_ttl=0), LaminaConfig())
        self.svc.add(FILLER)
        self.model: dict[str, tuple[str, tuple[str, ...]]] = {c.id: (c.text, c.acl) for c in FILLER}
        self.n = 0

    @rule(
        batch=st.lists(
            st.tuples(st.sampled_from(["a", "b", "c", "f1"]), st.sampled_from(ACLS)),
            min_size=1,
            max_size=3,
        )
    )
    def add_chunks(self, batch: list[tuple[str, tuple[str, ...]]]) -> None:
        chunks = []
        for cid, acl in batch:
            self.n += 1
            text = f"{WORDS[self.n % len(WORDS)]} item {cid} revision {self.n}"
            chunks.append(Chunk(id=cid, text=text, acl=acl))
            self.model[cid] = (text, acl)
        self.svc.add(chunks)

    @rule()
    def add_an_entity(self) -> None:
        self.svc.add([Entity(id="n", type="person", name="Ann")])

    @rule(caller=st.sampled_from(CALLERS))
    def query(self, caller: frozenset[str]) -> None:
        selection, warnings = retrieve(self.svc, " ".join([*WORDS, "item", "note"]), who=caller)
        assert warnings == []
        got = {c.source_id: c.text for c in selection.chosen if c.kind == "chunk"}
        want = {
            cid: text
            for cid, (text, acl) in self.model.items()
            if not acl or not caller.isdisjoint(acl)
        }
        assert got == want

    @invariant()
    def the_live_index_is_the_store(self) -> None:
        snap = self.svc.snapshot()
        live = [(c.id, c.text, c.acl) for c in snap.chunks]
        if snap.chunks_in_store:  # PostgreSQL: the store is the index, no chunk in memory
            assert live == []
            return
        assert live == [(c.id, c.text, c.acl) for c in self.svc.store.chunks()]

    def teardown(self) -> None:
        self.svc.close()


TestLiveIndexOnSQLite = LiveIndex.TestCase
TestLiveIndexOnSQLite.settings = settings(max_examples=30, stateful_step_count=12, deadline=None)


def test_the_live_index_follows_writes_on_postgres(postgres_dsn: str) -> None:
    class OnPostgres(LiveIndex):
        def __init__(self) -> None:
            type(self).url = fresh_database(postgres_dsn, extensions=("vector",))
            super().__init__()

    run = OnPostgres.TestCase()
    run.settings = settings(
        max_examples=8,
        stateful_step_count=10,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow],
    )
    run.runTest()


# -- what a store cannot hold, and what it can ------------------------------------------------


@pytest.mark.parametrize(
    ("memory", "field", "problem"),
    [
        (Chunk(id="x", text="bad \ud800 half"), "text", r"a lone surrogate U\+D800"),
        (Chunk(id="x", text="nul \x00 here"), "text", "a NUL character at offset 4"),
        (Chunk(id="x", text="t", embedding=(0.1, float("nan"))), "embedding", "NaN"),
        (Chunk(id="x", text="t", embedding=(float("inf"), 0.0)), "embedding", "infinity"),
        (Chunk(id="x", text="t", embedding=(1e39, 0.0)), "embedding", "32-bit"),
        (Chunk(id="x", text="t", acl=("ops\x00",)), r"acl\[0\]", "a NUL character"),
        (
            Entity(id="x", type="t", name="n", properties={"score": float("nan")}),
            "properties.score",
            "nan is not a finite number",
        ),
        (
            EpisodicEvent(id="x", type="t", text="\udfff", time=datetime(2026, 1, 1, tzinfo=UTC)),
            "text",
            "lone surrogate",
        ),
    ],
)
def test_what_a_store_cannot_hold_is_refused_whole(
    store_url: str, memory: Any, field: str, problem: str
) -> None:
    store = open_store(store_url)
    store.add([Chunk(id="keep", text="kept")])
    with pytest.raises(
        MemoryStoreError, match=rf"plugin 'memory': .*'x': field {field}.*{problem}"
    ):
        store.add([Chunk(id="ok", text="fine"), memory])
    assert [c.id for c in store.chunks()] == ["keep"] and store.version() == 1
    store.close()


def test_awkward_content_round_trips_exactly(store_url: str) -> None:
    odd = "tab\there, bell \x07, escape \x1b[31m, DEL \x7f, LS \u2028 PS \u2029, é🙂 \ufeff"
    items = [
        Chunk(id="odd", text=odd, acl=("role:\x01",)),
        Chunk(id="blank", text="deploy " + " " * 2_000_000 + " staging"),
        Entity(id="n", type="t", name=odd, properties={"nested": {"k": [odd, 1, None]}}),
    ]
    store = open_store(store_url)
    store.add(items)
    assert store.chunks() == items[:2] and store.entities() == [items[2]]
    store.close()

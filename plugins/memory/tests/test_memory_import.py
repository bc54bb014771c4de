"""Bulk import from .json and .jsonl: round trips, and every malformed or hostile file refused
whole with the file, the record or line and the field named, never a traceback."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest
from click.testing import CliRunner
from lamina_memory.cli import memory_group
from lamina_memory.importing import load_file
from lamina_memory.records import Chunk, Entity, EpisodicEvent

from lamina import ConfigError

T = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


def test_import_json_and_jsonl(tmp_path: Path) -> None:
    records = [
        {"kind": "chunk", "id": "c1", "text": "alpha", "time": "2026-01-01T12:00:00+00:00"},
        {"kind": "entity", "id": "n1", "type": "person", "name": "Ann", "salience": 0.9},
        {"kind": "event", "id": "e1", "type": "note", "text": "x", "time": "2026-01-01T12:00:00Z"},
    ]
    j = tmp_path / "m.json"
    j.write_text(json.dumps(records))
    jl = tmp_path / "m.jsonl"
    jl.write_text("\n".join(json.dumps(r) for r in records) + "\n\n")
    for path in (j, jl):
        got = load_file(path)
        assert got[0] == Chunk(id="c1", text="alpha", time=T)
        assert got[1] == Entity(id="n1", type="person", name="Ann", salience=0.9)
        assert got[2].time == T


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        ("bad.json", "{not json", r"not valid JSON \(line 1\)"),
        ("obj.json", '{"kind": "chunk"}', "expected a JSON list of memories"),
        (
            "kind.json",
            '[{"kind": "memo", "id": "x"}]',
            r"record 0: field kind must be one of event, chunk",
        ),
        ("missing.json", '[{"kind": "chunk", "id": "x"}]', r"text"),
        (
            "range.json",
            '[{"kind": "entity", "id": "n", "type": "t", "name": "x", "salience": 7}]',
            r"salience",
        ),
        (
            "line.jsonl",
            '{"kind": "chunk", "id": "a", "text": "x"}\n{oops\n',
            r"line 2: not valid JSON",
        ),
        ("scalar.jsonl", "42\n", r"line 1: expected an object, got int"),
        # numbers that are not numbers: NaN, the infinities, and overflow to infinity
        (
            "nan.jsonl",
            '{"kind": "chunk", "id": "a", "text": "x", "embedding": [0.5, NaN]}\n',
            r"line 1: field embedding\[1\]: nan is not a finite number",
        ),
        (
            "inf.jsonl",
            '{"kind": "chunk", "id": "a", "text": "x"}\n'
            '{"kind": "chunk", "id": "b", "text": "y", "embedding": [Infinity, 0.5]}\n',
            r"line 2: field embedding\[0\]: inf is not a finite number",
        ),
        (
            "huge.json",
            '[{"kind": "chunk", "id": "a", "text": "x", "embedding": [-1e999]}]',
            r"record 0: field embedding\[0\]: -inf is not a finite number",
        ),
        (
            "salience.jsonl",
            '{"kind": "event", "id": "e", "type": "t", "text": "x", '
            '"time": "2026-01-01T00:00:00Z", "salience": NaN}\n',
            r"line 1: field salience: nan is not a finite number",
        ),
        (
            "props.jsonl",
            '{"kind": "entity", "id": "n", "type": "t", "name": "x", '
            '"properties": {"score": -Infinity}}\n',
            r"line 1: field properties.score: -inf is not a finite number",
        ),
        (
            "bigint.jsonl",
            '{"kind": "pattern", "id": "p", "text": "x", "successes": 1, '
            '"applications": 100000000000000000000000}\n',
            r"line 1: field applications: 1\d+ is beyond 64-bit integers",
        ),
        # two records of one kind with one id: an error naming both places
        (
            "twice.jsonl",
            '{"kind": "chunk", "id": "a", "text": "x"}\n'
            '{"kind": "event", "id": "a", "type": "t", "text": "y", "time": "2026-01-01T00:00:00Z"}\n'
            '{"kind": "chunk", "id": "a", "text": "z"}\n',
            r"chunk id 'a' is on line 1 and again on line 3; ids must be unique",
        ),
        (
            "twice.json",
            '[{"kind": "entity", "id": "n", "type": "t", "name": "x"}, '
            '{"kind": "entity", "id": "n", "type": "t", "name": "y"}]',
            r"entity id 'n' is on record 0 and again on record 1",
        ),
        # text a store cannot hold, bytes that are not text, structure that is too deep
        (
            "surrogate.jsonl",
            '{"kind": "chunk", "id": "a", "text": "half \\ud800 pair"}\n',
            r"line 1: field text: a lone surrogate U\+D800 at offset 5",
        ),
        (
            "nul.jsonl",
            '{"kind": "chunk", "id": "a", "text": "x", "acl": ["ops\\u0000"]}\n',
            r"line 1: field acl\[0\]: a NUL character at offset 3",
        ),
        (
            "key.jsonl",
            '{"kind": "entity", "id": "n", "type": "t", "name": "x", '
            '"properties": {"\\udc80": 1}}\n',
            r"line 1: field properties: a key with a lone surrogate U\+DC80",
        ),
        ("bytes.jsonl", b'{"kind": "chunk"}\n\xff\xfe\x00', r"line 2: not UTF-8 text \(byte 0xff"),
        ("deep.json", "[" * 100_000 + "]" * 100_000, r"data: nested too deeply"),
        (
            "nested.jsonl",
            '{"kind": "entity", "id": "n", "type": "t", "name": "x", "properties": '
            + '{"a": ' * 70
            + "1"
            + "}" * 70
            + "}\n",
            r"line 1: field properties(\.a)+: nested deeper than 64 levels",
        ),
        (
            "year.jsonl",
            '{"kind": "event", "id": "e", "type": "t", "text": "x", '
            '"time": "0001-01-01T00:00:00+14:00"}\n',
            r"time 0001-01-01T00:00:00\+14:00 is out of range in UTC",
        ),
        (
            "listid.jsonl",
            '{"kind": "chunk", "id": ["a"], "text": "x"}\n',
            r"line 1.*id",
        ),
    ],
)
def test_malformed_import_data_names_file_and_record(
    tmp_path: Path, name: str, content: str | bytes, message: str
) -> None:
    path = tmp_path / name
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8")
    with pytest.raises(ConfigError, match=message) as info:
        load_file(path)
    assert name in str(info.value)
    config = tmp_path / "lamina.toml"
    config.write_text('model = "gpt-4o"\n[plugins.memory]\nstore = "sqlite:///m.db"\n')
    out = CliRunner().invoke(memory_group, ["import", "-c", str(config), str(path)])
    assert out.exit_code == 2 and isinstance(out.exception, SystemExit)  # no traceback
    assert name in out.output and "Traceback" not in out.output


def test_missing_import_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read memory import file"):
        load_file(tmp_path / "nope.json")


def test_records_of_different_kinds_may_share_an_id(tmp_path: Path) -> None:
    path = tmp_path / "m.jsonl"
    path.write_text(
        json.dumps({"kind": "chunk", "id": "a", "text": "x"})
        + "\n"
        + json.dumps({"kind": "entity", "id": "a", "type": "t", "name": "y"})
        + "\n"
    )
    assert [type(m) for m in load_file(path)] == [Chunk, Entity]


def test_hostile_but_storable_content_is_imported_and_injected_safely(
    tmp_path: Path, make: object
) -> None:
    """Control characters are kept exactly; megabytes of whitespace are stored as given and
    cost one space in the prompt; a JSON string's U+2028 is not a line break of JSON Lines."""
    odd = "bell \x07, escape \x1b[31m, DEL \x7f, LS \u2028 PS \u2029"
    blank = "deploy" + " \t" * 1_000_000 + "staging"
    path = tmp_path / "odd.jsonl"
    path.write_text(
        json.dumps({"kind": "chunk", "id": "odd", "text": odd}, ensure_ascii=False)
        + "\n"
        + json.dumps({"kind": "chunk", "id": "blank", "text": blank})
        + "\n",
        encoding="utf-8",
    )
    memories = load_file(path)
    assert memories == [Chunk(id="odd", text=odd), Chunk(id="blank", text=blank)]
    asm, svc = make()  # type: ignore[operator]
    svc.add(memories)
    assert svc.store.chunks() == memories
    ctx = asm.assemble(asm.request("deploy staging"))
    assert "deploy staging\n" in ctx.current_message.text
    assert len(ctx.current_message.text) < 2_000


def test_events_keep_their_time(tmp_path: Path) -> None:
    path = tmp_path / "e.jsonl"
    path.write_text(
        json.dumps(
            {"kind": "event", "id": "e", "type": "t", "text": "x", "time": "2026-01-01T13:00+01:00"}
        )
    )
    (event,) = load_file(path)
    assert isinstance(event, EpisodicEvent) and event.time == T

"""Malformed transcripts through ``lamina ledger import``: each one is a one-line error naming
the file, the line and the field (exit status 2, no traceback, nothing written); the few
well-formed oddities import into a session that reads and assembles; and one transcript
imports under two session names."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import click
import lamina_ledger.plugin as plugin
import pytest
from click.testing import CliRunner
from lamina_ledger.errors import TranscriptError
from lamina_ledger.importer import import_jsonl
from lamina_ledger.ledger import Ledger

from lamina import BudgetError
from lamina.testing import FAKE_MODEL, FakeModel, make_assembler

cli = click.Group()
plugin.lamina_commands(cli)

H = {"type": "session", "version": 3, "id": "h", "cwd": "."}


def msg(
    i: str, parent: str | None, role: Any = "user", content: Any = "hello", **extra: Any
) -> dict[str, Any]:
    m = {"role": role, "content": content, **extra}
    return {"type": "message", "id": i, "parentId": parent, "message": m}


def lines(*objs: Any) -> str:
    return "\n".join(o if isinstance(o, str) else json.dumps(o) for o in objs) + "\n"


def call(args: Any) -> dict[str, Any]:
    return {"type": "toolCall", "id": "c1", "name": "x", "arguments": args}


A1 = [{"type": "text", "text": "hi"}]
OK_RESULT = [{"type": "text", "text": "ok"}]
NON_UTF8 = (
    json.dumps(H).encode()
    + b'\n{"type": "message", "id": "u1", "message": {"role": "user", "content": "caf\xe9"}}\n'
)
HUGE = lines(H, msg("u1", None, content="word " * 400_000))  # one 2 MB line

#: case -> transcript (str, or bytes written as they are)
CASES: dict[str, str | bytes] = {
    "valid_reference": lines(H, msg("u1", None), msg("a1", "u1", "assistant", A1)),
    "truncated_last_line": lines(H, msg("u1", None))[:-1]
    + '\n{"type": "message", "id": "u2", "par',
    "not_json": "this is not json\n",
    "empty_file": "",
    "only_header": lines(H),
    "blank_lines_crlf": lines(H).replace("\n", "\r\n")
    + "\r\n\r\n"
    + json.dumps(msg("u1", None))
    + "\r\n",
    "bom": "\ufeff" + lines(H, msg("u1", None)),
    "entry_not_object": lines(H, [1, 2, 3]),
    "no_type": lines(H, {"id": "x"}),
    "type_is_list": lines(H, {"type": ["message"], "id": "x"}),
    "type_unknown": lines(H, {"type": "telepathy", "id": "x"}),
    "id_is_list": lines(H, {**msg("u1", None), "id": ["u1"]}),
    "id_is_object": lines(H, {**msg("u1", None), "id": {"a": 1}}),
    "parent_is_list": lines(H, msg("u1", None), {**msg("u2", None), "parentId": ["u1"]}),
    "parent_missing": lines(H, msg("u1", "nope")),
    "parent_loop": lines(H, msg("u1", "u2"), msg("u2", "u1")),
    "self_parent": lines(H, msg("u1", "u1")),
    "message_not_object": lines(H, {"type": "message", "id": "u1", "message": "hi"}),
    "role_unknown": lines(H, msg("u1", None, role="wizard")),
    "role_number": lines(H, msg("u1", None, role=5)),
    "content_number": lines(H, msg("u1", None, content=5)),
    "content_list_of_str": lines(H, msg("u1", None, content=["a", "b"])),
    "part_unknown_type": lines(H, msg("u1", None, content=[{"type": "hologram"}])),
    "text_is_object": lines(H, msg("u1", None, content=[{"type": "text", "text": {"x": 1}}])),
    "toolcall_no_id": lines(
        H,
        msg("u1", None),
        msg("a1", "u1", "assistant", [{"type": "toolCall", "name": "x", "arguments": {}}]),
    ),
    "toolcall_args_string": lines(
        H,
        msg("u1", None),
        msg("a1", "u1", "assistant", [call('{"a": 1}')]),
        msg("r1", "a1", "toolResult", OK_RESULT, toolCallId="c1"),
    ),
    "toolcall_args_list": lines(H, msg("u1", None), msg("a1", "u1", "assistant", [call([1])])),
    "toolcall_args_number": lines(H, msg("u1", None), msg("a1", "u1", "assistant", [call(7)])),
    "toolresult_no_callid": lines(H, msg("u1", None), msg("r1", "u1", "toolResult", OK_RESULT)),
    "toolresult_orphan": lines(
        H, msg("u1", None), msg("r1", "u1", "toolResult", OK_RESULT, toolCallId="zzz")
    ),
    "image_no_data": lines(
        H, msg("u1", None, content=[{"type": "image", "mimeType": "image/png"}])
    ),
    "image_data_number": lines(
        H, msg("u1", None, content=[{"type": "image", "mimeType": "image/png", "data": 5}])
    ),
    "usage_inf": lines(
        H,
        msg("u1", None),
        '{"type": "message", "id": "a1", "parentId": "u1", "message": {"role": "assistant", "content": "x", "usage": {"input": 1e999}}}',
    ),
    "usage_huge_int": lines(
        H, msg("u1", None), msg("a1", "u1", "assistant", "x", usage={"input": 10**30})
    ),
    "usage_string": lines(
        H, msg("u1", None), msg("a1", "u1", "assistant", "x", usage={"input": "lots"})
    ),
    "usage_negative": lines(
        H, msg("u1", None), msg("a1", "u1", "assistant", "x", usage={"input": -100})
    ),
    "usage_float": lines(
        H, msg("u1", None), msg("a1", "u1", "assistant", "x", usage={"input": 12.7})
    ),
    "timestamp_number": lines(H, {**msg("u1", None), "timestamp": 12345}),
    "timestamp_object": lines(H, {**msg("u1", None), "timestamp": {"t": 1}}),
    "compaction_no_summary": lines(
        H,
        msg("u1", None),
        {"type": "compaction", "id": "k1", "parentId": "u1", "firstKeptEntryId": "u1"},
    ),
    "compaction_summary_number": lines(
        H,
        msg("u1", None),
        {
            "type": "compaction",
            "id": "k1",
            "parentId": "u1",
            "summary": 5,
            "firstKeptEntryId": "u1",
        },
    ),
    "compaction_bad_first_kept": lines(
        H,
        msg("u1", None),
        {
            "type": "compaction",
            "id": "k1",
            "parentId": "u1",
            "summary": "s",
            "firstKeptEntryId": "zz",
        },
    ),
    "compaction_tokens_string": lines(
        H,
        msg("u1", None),
        {
            "type": "compaction",
            "id": "k1",
            "parentId": "u1",
            "summary": "s",
            "tokensBefore": "many",
        },
    ),
    "compaction_first_kept_list": lines(
        H,
        msg("u1", None),
        {
            "type": "compaction",
            "id": "k1",
            "parentId": "u1",
            "summary": "s",
            "firstKeptEntryId": ["u1"],
        },
    ),
    "duplicate_ids": lines(H, msg("u1", None), msg("u1", None, content="again")),
    "lone_surrogate": lines(H, msg("u1", None))
    + '{"type": "message", "id": "u2", "parentId": "u1", "message": {"role": "user", "content": "bad \\ud800 char"}}\n',
    "nul_in_text": lines(H, msg("u1", None, content="a\u0000b")),
    "non_utf8": NON_UTF8,
    "deep_nesting": lines(H)
    + '{"type": "message", "id": "u1", "message": {"role": "user", "content": "x"}, "x": '
    + "[" * 100000
    + "]" * 100000
    + "}\n",
    "huge_line": HUGE,
    "header_id_weird": lines({**H, "id": "../../etc"}, msg("u1", None)),
    "header_id_list": lines({**H, "id": ["x"]}, msg("u1", None)),
    "thinking_only": lines(
        H, msg("u1", None), msg("a1", "u1", "assistant", [{"type": "thinking", "thinking": "hmm"}])
    ),
}

#: refused case -> (line, what the message says: the field, or the cause where there is none)
REFUSED: dict[str, tuple[int | None, str]] = {
    "truncated_last_line": (3, "not valid JSON (Unterminated string"),
    "not_json": (1, "not valid JSON (Expecting value"),
    "empty_file": (None, "the transcript is empty"),
    "entry_not_object": (2, "an entry must be a JSON object, got an array"),
    "no_type": (2, "type: must be a string, got null"),
    "type_is_list": (2, "type: must be a string, got an array"),
    "type_unknown": (2, "type: unknown entry type 'telepathy'"),
    "id_is_list": (2, "id: must be a string, got an array"),
    "id_is_object": (2, "id: must be a string, got an object"),
    "parent_is_list": (3, "parentId: must be a string, got an array"),
    "parent_missing": (2, "parentId 'nope' names no entry in the file"),
    "parent_loop": (3, "parentId loop at entry 'u2'"),
    "self_parent": (2, "parentId loop at entry 'u1'"),
    "message_not_object": (2, "message: a message entry needs a 'message' object, got a string"),
    "role_unknown": (2, "message.role: unknown message role 'wizard'"),
    "role_number": (2, "message.role: unknown message role 5"),
    "content_number": (2, "message.content: must be a string or an array of parts"),
    "content_list_of_str": (2, "message.content[0]: a part must be an object, got a string"),
    "part_unknown_type": (2, "message.content[0].type: unknown content type 'hologram'"),
    "text_is_object": (2, "message.content[0].text: must be a string, got an object"),
    "toolcall_no_id": (3, "message.content[0].id: must be a string, got null"),
    "toolcall_args_string": (3, "message.content[0].arguments: must be an object, got a string"),
    "toolcall_args_list": (3, "message.content[0].arguments: must be an object, got an array"),
    "toolcall_args_number": (3, "message.content[0].arguments: must be an object, got a number"),
    "toolresult_no_callid": (3, "message.toolCallId: must be a string, got null"),
    "toolresult_orphan": (3, "message.toolCallId: no tool call 'zzz' comes before"),
    "image_no_data": (2, "message.content[0].data: must be a string, got null"),
    "image_data_number": (2, "message.content[0].data: must be a string, got a number"),
    "usage_inf": (3, "message.usage.input: must be a whole number, got inf"),
    "usage_huge_int": (3, "message.usage.input: must be from 0 to"),
    "usage_string": (3, "message.usage.input: must be a whole number, got a string"),
    "usage_negative": (3, "message.usage.input: must be from 0 to"),
    "usage_float": (3, "message.usage.input: must be a whole number, got 12.7"),
    "timestamp_number": (2, "timestamp: must be a string, got a number"),
    "timestamp_object": (2, "timestamp: must be a string, got an object"),
    "compaction_no_summary": (3, "summary: must be a string, got null"),
    "compaction_summary_number": (3, "summary: must be a string, got a number"),
    "compaction_bad_first_kept": (3, "firstKeptEntryId 'zz' is not a message before it"),
    "compaction_tokens_string": (3, "tokensBefore: must be a whole number, got a string"),
    "compaction_first_kept_list": (3, "firstKeptEntryId: must be a string, got an array"),
    "duplicate_ids": (3, "id: duplicate entry id 'u1' (also on line 2)"),
    "lone_surrogate": (3, "message.content: is not valid Unicode (a lone surrogate"),
    "non_utf8": (2, "not UTF-8 (byte 0xe9"),
    "deep_nesting": (2, "not valid JSON (nested too deeply)"),
    "header_id_list": (1, "id: must be a string, got an array"),
}
ACCEPTED = sorted(set(CASES) - set(REFUSED))


def write(folder: Path, name: str) -> Path:
    path = folder / f"{name}.jsonl"
    content = CASES[name]
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8", errors="surrogatepass")
    return path


def test_every_case_is_either_refused_or_accepted() -> None:
    assert len(CASES) == 53 and set(REFUSED) < set(CASES)
    assert ACCEPTED == [
        "blank_lines_crlf",
        "bom",
        "header_id_weird",
        "huge_line",
        "nul_in_text",
        "only_header",
        "thinking_only",
        "valid_reference",
    ]


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_a_malformed_transcript_is_a_clear_error(tmp_path: Path, name: str) -> None:
    src, db = write(tmp_path, name), str(tmp_path / "l.db")
    out = CliRunner().invoke(cli, ["ledger", "import", str(src), "-s", "imp", "-d", db])
    assert isinstance(out.exception, SystemExit), out.exception  # no traceback
    assert out.exit_code == 2, out.output
    line, says = REFUSED[name]
    where = str(src) if line is None else f"{src}:{line}"
    assert out.output.startswith(f"lamina: error: session 'imp': {where}: "), out.output
    assert says in out.output and out.output.count("\n") == 1
    with Ledger.open(db) as ledger:  # nothing written
        assert ledger.sessions() == [] and ledger.db.one("SELECT count(*) FROM turns") == (0,)
    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)


def test_the_error_carries_file_line_and_field(tmp_path: Path) -> None:
    src = write(tmp_path, "text_is_object")
    with Ledger.open(str(tmp_path / "l.db")) as ledger, pytest.raises(TranscriptError) as err:
        import_jsonl(ledger, src, "imp")
    assert (err.value.file, err.value.line, err.value.field) == (
        str(src),
        2,
        "message.content[0].text",
    )
    assert err.value.exit_code == 2


@pytest.mark.parametrize("name", ACCEPTED)
def test_an_odd_but_well_formed_transcript_reads_and_assembles(tmp_path: Path, name: str) -> None:
    src, db = write(tmp_path, name), str(tmp_path / "l.db")
    out = CliRunner().invoke(cli, ["ledger", "import", str(src), "-s", "imp", "-d", db])
    assert out.exit_code == 0, out.output
    with Ledger.open(db, readonly=True) as ledger:
        history = ledger.history("imp")
    config = {
        "model": FAKE_MODEL,
        "session": "imp",
        "budget": {"reserve_response": 0},
        "plugins": {"ledger": {"database": db}},
    }
    a = make_assembler(
        config, plugins=[("ledger", plugin), ("fake", FakeModel(context_window=100_000))]
    )
    try:
        ctx = a.assemble(a.request("now"))
    except BudgetError:
        assert name == "huge_line"  # too big for the window: a budget error, not a broken session
    else:
        assert len(ctx.history) == sum(len(t.messages) for t in history.turns)
    finally:
        a.close()


def test_one_transcript_under_two_session_names(target: str, tmp_path: Path) -> None:
    src = write(tmp_path, "valid_reference")
    with Ledger.open(target) as ledger:
        first = import_jsonl(ledger, src, "first")
        second = import_jsonl(ledger, src, "second")
        assert (first.turns, second.turns) == (1, 1)
        a, b = ledger.history("first"), ledger.history("second")
        assert [t.messages for t in a.turns] == [t.messages for t in b.turns]
        assert {t.id for t in a.turns}.isdisjoint(t.id for t in b.turns)
        assert ledger.ancestry("first") == ["h/u1"]  # the first import keeps the file's ids

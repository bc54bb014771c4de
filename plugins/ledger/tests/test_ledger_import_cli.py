"""Importing pi / OpenClaw JSONL transcripts and the ``lamina ledger`` commands."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import click
import pytest
from click.testing import CliRunner
from lamina_ledger.errors import LedgerError
from lamina_ledger.importer import import_jsonl
from lamina_ledger.ledger import Ledger
from lamina_ledger.plugin import lamina_commands
from lamina_ledger.stats import turn_report
from lamina_ledger.transcript import TranscriptError

from lamina import ToolCallPart, ToolResultPart

cli = click.Group()
lamina_commands(cli)  # a fresh group: the kernel's own stays untouched

USAGE = {"input": 100, "output": 20, "cacheRead": 900, "cacheWrite": 0, "totalTokens": 1020}
ENTRIES = [
    {"type": "session", "version": 3, "id": "sess1", "cwd": "/w"},
    {
        "type": "message",
        "id": "e1",
        "parentId": None,
        "message": {"role": "user", "content": "List the files"},
    },
    {
        "type": "message",
        "id": "e2",
        "parentId": "e1",
        "message": {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "hm"},
                {"type": "toolCall", "id": "k1", "name": "ls", "arguments": {"dir": "."}},
            ],
            "usage": USAGE,
            "model": "claude-sonnet-4-5",
            "provider": "anthropic",
        },
    },
    {
        "type": "message",
        "id": "e3",
        "parentId": "e2",
        "message": {
            "role": "toolResult",
            "toolCallId": "k1",
            "toolName": "ls",
            "content": [{"type": "text", "text": "a.py\nb.py"}],
            "isError": False,
        },
    },
    {
        "type": "message",
        "id": "e4",
        "parentId": "e3",
        "message": {
            "role": "assistant",
            "content": [{"type": "text", "text": "Two files."}],
            "usage": USAGE,
        },
    },
    {
        "type": "model_change",
        "id": "e5",
        "parentId": "e4",
        "provider": "openai",
        "modelId": "gpt-4o",
    },
    {
        "type": "message",
        "id": "e6",
        "parentId": "e5",
        "message": {"role": "user", "content": [{"type": "text", "text": "Open a.py"}]},
    },
    {
        "type": "message",
        "id": "e7",
        "parentId": "e6",
        "message": {
            "role": "assistant",
            "content": [{"type": "text", "text": "Done."}],
            "usage": USAGE,
        },
    },
    {
        "type": "compaction",
        "id": "e8",
        "parentId": "e7",
        "summary": "Listed files.",
        "firstKeptEntryId": "e6",
        "tokensBefore": 5000,
    },
    {
        "type": "message",
        "id": "e9",
        "parentId": "e8",
        "message": {"role": "user", "content": "Thanks"},
    },
]


def write(path: Path, entries: list[dict]) -> Path:
    path.write_text("\n".join(json.dumps(e) for e in entries) + "\n")
    return path


def test_import_groups_turns_and_applies_the_compaction(tmp_path: Path, target: str) -> None:
    src = write(tmp_path / "s.jsonl", ENTRIES)
    with Ledger.open(target) as w:
        r = import_jsonl(w, src, "imported")
        assert (r.turns, r.compactions, r.messages, r.skipped) == (3, 1, 7, 1)
        full = [w.turn(t) for t in w.ancestry("imported")]
        h = w.history("imported")
    first = full[0]
    assert [m.role for m in first.messages] == ["user", "assistant", "tool", "assistant"]
    assert first.messages[1].content == (ToolCallPart(id="k1", name="ls", arguments={"dir": "."}),)
    assert first.messages[2].content == (ToolResultPart(call_id="k1", content="a.py\nb.py"),)
    assert first.usage is not None and first.usage.input_tokens == 2000
    assert first.usage.cached_input_tokens == 1800 and first.usage.output_tokens == 40
    assert first.model == "claude-sonnet-4-5"
    assert h.compaction is not None and h.compaction.summary == "Listed files."
    assert h.compaction.tokens_before == 5000
    assert [t.messages[0].text for t in h.turns] == ["Open a.py", "Thanks"]


@pytest.mark.parametrize(
    ("entries", "message"),
    [
        ([*ENTRIES[:3], "{not json"], r"s.jsonl:4: not valid JSON"),
        (
            [*ENTRIES[:8], {**ENTRIES[8], "firstKeptEntryId": "zz"}],
            r"firstKeptEntryId 'zz' is not a message",
        ),
        ([*ENTRIES[:2], {**ENTRIES[2], "parentId": "ghost"}], r"parentId 'ghost' names no entry"),
        (
            [
                *ENTRIES[:2],
                {"type": "message", "id": "x", "parentId": "e1", "message": {"role": "robot"}},
            ],
            r"unknown message role 'robot'",
        ),
    ],
)
def test_bad_transcripts_write_nothing(tmp_path: Path, entries: list, message: str) -> None:
    lines = [e if isinstance(e, str) else json.dumps(e) for e in entries]
    src = tmp_path / "s.jsonl"
    src.write_text("\n".join(lines) + "\n")
    db = str(tmp_path / "l.db")
    with Ledger.open(db) as w:
        with pytest.raises(LedgerError, match=message) as err:
            import_jsonl(w, src, "imp")
        assert "session 'imp'" in str(err.value)
        assert w.sessions() == []
        assert w.db.one("SELECT count(*) FROM turns") == (0,)


def test_cli_import_then_stats(tmp_path: Path) -> None:
    src = write(tmp_path / "s.jsonl", ENTRIES)
    db = str(tmp_path / "l.db")
    runner = CliRunner()
    out = runner.invoke(cli, ["ledger", "import", str(src), "--session", "chat", "--database", db])
    assert out.exit_code == 0, out.output
    assert "imported 3 turns (7 messages) and 1 compactions into session 'chat'" in out.output
    out = runner.invoke(cli, ["ledger", "stats", "chat", "--database", db])
    assert out.exit_code == 0, out.output
    lines = dict(line.split("  ", 1) for line in out.output.splitlines())
    values = {k.strip(): v.strip() for k, v in lines.items()}
    # 3 assistant requests of 1,000 input tokens (900 cached) in turns 1 and 2
    assert values["turns"] == "3" and values["compactions"] == "1"
    assert values["input tokens"] == "3,000" and values["cached input tokens"] == "2,700"
    assert values["cache-hit ratio"] == "0.900"


def test_cli_stats_errors_name_the_session(tmp_path: Path) -> None:
    db = str(tmp_path / "l.db")
    Ledger.open(db).close()
    out = CliRunner().invoke(cli, ["ledger", "stats", "ghost", "--database", db])
    assert out.exit_code == 1
    assert "session 'ghost': no such session" in out.output


def test_cli_reads_the_database_from_the_config(tmp_path: Path) -> None:
    (tmp_path / "lamina.toml").write_text('[plugins.ledger]\ndatabase = "state/l.db"\n')
    src = write(tmp_path / "s.jsonl", ENTRIES)
    runner = CliRunner()
    cfg = str(tmp_path / "lamina.toml")
    out = runner.invoke(cli, ["ledger", "import", str(src), "-s", "c", "--config", cfg])
    assert out.exit_code == 0, out.output
    assert (tmp_path / "state" / "l.db").is_file()  # relative to the config file
    out = runner.invoke(cli, ["ledger", "stats", "c", "--config", cfg])
    assert "cache-hit ratio      0.900" in out.output


def test_imported_turns_cost_the_transcripts_price_else_models_dev(tmp_path: Path) -> None:
    entries = json.loads(json.dumps(ENTRIES))
    entries[7]["message"]["usage"]["cost"] = {"total": 0.0123}  # turn 2: the transcript's
    entries[4]["message"]["usage"]["cost"] = {"total": 1.0}  # turn 1: one of two requests
    src = write(tmp_path / "s.jsonl", entries)
    with Ledger.open(str(tmp_path / "l.db")) as w:
        import_jsonl(w, src, "chat")
        costs = [t.cost for t in turn_report(w, "chat").turns]
    # Turn 1 at claude-sonnet-4-5's prices on models.dev: $3 input, $0.30 cached, $15 output.
    assert costs[0] == pytest.approx((200 * 3 + 1800 * 0.3 + 40 * 15) / 1e6)
    assert costs[1:] == [pytest.approx(0.0123), None, None]  # then the compaction, turn 3
    bad = json.loads(json.dumps(ENTRIES))
    bad[2]["message"]["usage"]["cost"] = {"total": "cheap"}
    says = r"b.jsonl:3: message.usage.cost.total: must be a number of dollars"
    with Ledger.open(str(tmp_path / "m.db")) as w, pytest.raises(TranscriptError, match=says):
        import_jsonl(w, write(tmp_path / "b.jsonl", bad), "b")


def _on_a_terminal(args: list[str], cwd: Path) -> tuple[int, str, str]:
    """Run ``lamina`` with standard error on a pseudo-terminal: (exit code, stdout, stderr)."""
    master, slave = os.openpty()
    env = {**os.environ, "LAMINA_PLUGINS": "ledger"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "lamina", *args],
        stdout=subprocess.PIPE,
        stderr=slave,
        cwd=cwd,
        env=env,
        text=True,
    )
    os.close(slave)
    chunks = []
    while True:
        try:
            chunk = os.read(master, 4096)
        except OSError:  # the terminal closed with the process
            break
        if not chunk:
            break
        chunks.append(chunk)
    out, _ = proc.communicate(timeout=120)
    os.close(master)
    return proc.returncode, out, b"".join(chunks).decode("utf-8", "replace")


def test_import_shows_progress_on_a_terminal_and_nothing_in_a_pipe(tmp_path: Path) -> None:
    many, parent = [ENTRIES[0]], None
    for i in range(300):
        reply = {"role": "assistant", "content": [{"type": "text", "text": "a"}], "usage": USAGE}
        for key, message in ((f"u{i}", {"role": "user", "content": "q"}), (f"a{i}", reply)):
            many.append({"type": "message", "id": key, "parentId": parent, "message": message})
            parent = key
    src = write(tmp_path / "many.jsonl", many)
    code, out, err = _on_a_terminal(
        ["ledger", "import", str(src), "-s", "t", "-d", "t.db"], tmp_path
    )
    assert code == 0, err
    assert "imported 300 turns" in out
    assert f"\rlamina: {src}: 300 of 300 entries, " in err and err.endswith("/s\r\n")
    piped = subprocess.run(
        [sys.executable, "-m", "lamina", "ledger", "import", str(src), "-s", "p", "-d", "p.db"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**os.environ, "LAMINA_PLUGINS": "ledger"},
        timeout=120,
    )
    assert piped.returncode == 0 and piped.stderr == "" and "imported 300 turns" in piped.stdout

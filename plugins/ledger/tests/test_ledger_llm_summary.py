"""Compaction with an LLM summarizer (OpenAI's, through a local server speaking the Chat
Completions protocol; nothing reaches the network): the model's summary is stored, custom
instructions reach it, and any failure falls back to the extractive summary with a warning in
the compaction result and the assembly's report. Usage ``send`` returns reaches the ledger."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import lamina_ledger.plugin as ledger_plugin
import pytest
from lamina_ledger.session import LedgerSession
from lamina_ledger.store import session_store

from lamina import Assembler, CompactionRequest, Message, Summarizer, hookimpl
from lamina.testing import make_assembler
from lamina.testing.wire_server import Answer, WireServer

lamina_openai = pytest.importorskip("lamina_openai")

KEY_ENV = "LAMINA_TEST_OPENAI_KEY"
SUMMARY = "Goal: look at every module\nDecisions:\n- use approach 5"


def chat_reply(text: str, *, prompt: int = 900, cached: int = 0) -> Answer:
    """A Chat Completions reply as the API sends it."""
    return Answer(
        body={
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "created": 1741570283,
            "model": "gpt-4o-mini-2024-07-18",
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": text, "refusal": None},
                    "finish_reason": "stop",
                }
            ],
            "usage": {
                "prompt_tokens": prompt,
                "completion_tokens": 40,
                "total_tokens": prompt + 40,
                "prompt_tokens_details": {"cached_tokens": cached},
            },
        }
    )


FAILURE = Answer(
    status=500, body={"error": {"message": "The server had an error", "type": "server_error"}}
)


def assembler(db: str, url: str, budget: int = 1200, **openai: Any) -> Assembler:
    config = {
        "model": "gpt-4o",
        "session": "s",
        "budget": {"max_tokens": budget, "reserve_response": 0, "reserve_tools": 0},
        "plugins": {
            "ledger": {"database": db, "summarizer": "openai-llm", "minimum_turns": 2},
            "openai": {
                "base_url": f"{url}/v1",
                "api_key_env": KEY_ENV,
                "max_retries": 0,
                "summarizer": {"model": "gpt-4o-mini", **openai},
            },
        },
    }
    return make_assembler(
        config, plugins=[("ledger", ledger_plugin), ("openai", lamina_openai.plugin)]
    )


@pytest.fixture(autouse=True)
def _key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, "test-key-not-secret")


def fill(s: LedgerSession, a: Assembler, exchange: Callable[..., list[Message]], n: int) -> None:
    s.start("s")
    for i in range(n):
        s.record_turn(a.request(f"q{i}"), exchange(i))


def test_the_models_summary_is_stored_with_the_instructions_sent(
    tmp_path: Path, exchange: Callable[..., list[Message]]
) -> None:
    with WireServer(chat_reply(SUMMARY)) as server:
        a = assembler(str(tmp_path / "l.db"), server.url, instructions="Keep file names.")
        with a, LedgerSession(a) as s:
            fill(s, a, exchange, 8)
            done = s.compact(a.request("now"), share=0.3, instructions="Mention approach 5.")
            assert done is not None and done.summarizer == "openai-llm" and done.warnings == ()
            first = s.ledger.history("s").compaction
            for i in range(8, 14):
                s.record_turn(a.request(f"q{i}"), exchange(i))
            again = asyncio.run(s.acompact(a.request("now"), share=0.3, instructions="Be brief."))
            assert again is not None
            second = s.ledger.history("s").compaction
    assert first is not None and first.summary == SUMMARY and first.summarizer == "openai-llm"
    assert second is not None and second.summary == SUMMARY
    sent = [r.body for r in server.requests]
    assert [b["model"] for b in sent] == ["gpt-4o-mini", "gpt-4o-mini"]
    system, user = sent[0]["messages"][0]["content"], sent[0]["messages"][1]["content"]
    assert system.endswith("Additional instructions:\nKeep file names.\nMention approach 5.")
    assert "[user] Please look at src/mod0.py question 0?" in user
    assert "[assistant calls tool read]" in user and "<previous_summary>" not in user
    later = sent[1]["messages"][1]["content"]  # the second compaction folds the first in
    assert later.startswith(f"<previous_summary>\n{SUMMARY}\n</previous_summary>")
    assert sent[1]["messages"][0]["content"].endswith("Keep file names.\nBe brief.")


def test_a_provider_error_falls_back_to_the_extractive_summary_with_a_warning(
    tmp_path: Path, exchange: Callable[..., list[Message]]
) -> None:
    with WireServer(FAILURE) as server:
        a = assembler(str(tmp_path / "l.db"), server.url)
        with a, LedgerSession(a) as s:
            fill(s, a, exchange, 8)
            done = s.compact(a.request("now"), share=0.3)
            compaction = s.ledger.history("s").compaction
    assert done is not None and done.summarizer == "ledger-extractive"
    assert compaction is not None and compaction.summarizer == "ledger-extractive"
    assert compaction.summary.startswith("Goal: Please look at src/mod0.py question 0?")
    (warning,) = done.warnings
    assert warning.startswith("summarizer 'openai-llm' failed (SendError: plugin 'openai'")
    assert "HTTP 500" in warning and warning.endswith(
        "compacted with the extractive summary ('ledger-extractive') instead"
    )
    assert len(server.requests) == 1  # max_retries = 0


def test_the_warning_reaches_the_report_of_the_assembly_that_compacted(
    tmp_path: Path, exchange: Callable[..., list[Message]]
) -> None:
    with WireServer(FAILURE) as server:
        a = assembler(str(tmp_path / "l.db"), server.url, budget=400)
        with a, LedgerSession(a) as s:
            s.start("s")
            reports: list[tuple[str, ...]] = []
            for i in range(12):
                ctx = s.assemble(a.request(f"q{i}"))
                reports.append(ctx.report.warnings)
                s.record_turn(ctx, [ctx.current_message, *exchange(i)[1:]])
            assert s.compactions, "the budget should have forced a compaction"
    warned = [w for ws in reports for w in ws if "openai-llm" in w]
    assert warned and all(
        w.startswith("plugin 'ledger': summarizer 'openai-llm' failed") for w in warned
    )
    assert sum(1 for ws in reports if any("openai-llm" in w for w in ws)) == len(
        [c for c in s.compactions if c.warnings]
    )
    assert server.requests


def test_the_session_store_passes_instructions_and_reports_the_fallback(
    tmp_path: Path, exchange: Callable[..., list[Message]]
) -> None:
    with WireServer(FAILURE, chat_reply(SUMMARY)) as server:
        a = assembler(str(tmp_path / "l.db"), server.url)
        settings = a.settings("ledger")
        store = session_store(settings)
        with a, LedgerSession(a) as s:
            fill(s, a, exchange, 10)
        failed = store.compact(
            a, a.request("now"), CompactionRequest(target=0.3, instructions="Keep paths.")
        )
        worked = store.compact(
            a, a.request("now"), CompactionRequest(target=0.2, instructions="Keep ids.")
        )
        assert store.close is not None
        store.close(a)
    assert failed.compacted and any("'openai-llm' failed" in w for w in failed.warnings)
    assert worked.compacted and worked.warnings == ()
    assert [r.body["messages"][0]["content"].rsplit("\n", 1)[-1] for r in server.requests] == [
        "Keep paths.",
        "Keep ids.",
    ]


class Flaky:
    """A third-party summarizer plugin: one summarizer that raises, one that returns nothing."""

    @hookimpl
    def lamina_summarizers(self) -> Iterable[Summarizer]:
        def boom(blocks: Any, limit: int, tokenizer: Any) -> str:
            raise RuntimeError("model unavailable")

        return [
            Summarizer(name="boom", summarize=boom),
            Summarizer(name="blank", summarize=lambda blocks, limit, tokenizer: "   "),
        ]


@pytest.mark.parametrize(
    ("name", "reason"),
    [("boom", "RuntimeError: model unavailable"), ("blank", "it returned an empty summary")],
)
def test_any_summarizer_that_fails_is_replaced(
    tmp_path: Path, exchange: Callable[..., list[Message]], name: str, reason: str
) -> None:
    config = {
        "model": "gpt-4o",
        "session": "s",
        "plugins": {"ledger": {"database": str(tmp_path / "l.db"), "summarizer": name}},
    }
    a = make_assembler(config, plugins=[("ledger", ledger_plugin), ("flaky", Flaky())])
    with a, LedgerSession(a) as s:
        fill(s, a, exchange, 6)
        done = s.compact(a.request("now"), share=0.2, instructions="Keep it.")
    assert done is not None and done.summarizer == "ledger-extractive"
    assert done.warnings == (
        f"summarizer {name!r} takes no instructions; compacted without them",
        f"summarizer {name!r} failed ({reason}); compacted with the extractive summary "
        "('ledger-extractive') instead",
    )


def test_send_returns_usage_the_ledger_records_and_an_overflow_is_recovered(
    tmp_path: Path, exchange: Callable[..., list[Message]]
) -> None:
    overflow = Answer(
        status=400,
        body={
            "error": {
                "message": "This model's maximum context length is 128000 tokens.",
                "type": "invalid_request_error",
                "code": "context_length_exceeded",
            }
        },
    )
    answers = [chat_reply("First.", prompt=1500, cached=0), overflow, chat_reply(SUMMARY)]
    answers.append(chat_reply("Second.", prompt=1600, cached=1280))
    with WireServer(*answers) as server:
        a = assembler(str(tmp_path / "l.db"), server.url, budget=100_000)
        adapter = a.adapter("openai")
        assert adapter.send is not None
        send = adapter.send
        with a, LedgerSession(a) as s:
            fill(s, a, exchange, 6)
            for text in ("one", "two"):
                ctx, result = s.run(a.request(text), lambda c: send(c, {}))
                s.record_turn(ctx, [ctx.current_message, *result.messages], usage=result.usage)
            stats = s.ledger.stats("s")
            triggers = [c.trigger for c in s.compactions]
    assert stats.input_tokens == 3100 and stats.cached_input_tokens == 1280
    assert triggers == ["overflow_recovery"]
    # the retried request is the recovered context, built by the adapter, sent as built
    assert json.dumps(server.requests[3].body).count("Previous conversation summary") == 1

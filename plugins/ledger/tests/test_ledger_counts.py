"""Stored token counts are trusted only by the tokenizer that made them: a session recorded
under one model and assembled for another is counted again, and stays within its budget."""

from __future__ import annotations

from pathlib import Path

import lamina_ledger.plugin as plugin
import pytest
from lamina_ledger.ledger import Ledger
from lamina_ledger.session import LedgerSession

from lamina import Message
from lamina.testing import make_assembler
from lamina.tokens import load_encoding


def config(db: str, model: str = "gpt-4o") -> dict[str, object]:
    return {
        "model": model,
        "session": "s",
        "budget": {"reserve_response": 0},
        "plugins": {"ledger": {"database": db}},
    }


@pytest.mark.parametrize("max_tokens", [2000, 4000])
def test_counts_recorded_under_one_model_are_not_trusted_for_another(
    tmp_path: Path, max_tokens: int
) -> None:
    db = str(tmp_path / "ledger.db")
    recorder = make_assembler(config(db), plugins=[("ledger", plugin)])
    with LedgerSession(recorder) as ls:
        ls.start("s")
        for i in range(40):  # text whose o200k and cl100k counts differ by far
            ls.record_turn(
                recorder.request(f"q{i}"),
                [
                    Message.of("user", "नमस्ते दुनिया " * 20),
                    Message.of("assistant", "Привет мир " * 20),
                ],
            )
    recorder.close()
    a = make_assembler(config(db), plugins=[("ledger", plugin)])
    ctx = a.assemble(a.request("hi", model="gpt-4", max_tokens=max_tokens))
    a.close()
    cl100k = load_encoding("cl100k_base")
    parts = [ctx.system_prompt, *(m.text for m in ctx.history), ctx.current_message.text]
    framing = 4 * (len(ctx.history) + 1 + bool(ctx.system_prompt)) + 3
    real = sum(len(cl100k.encode(p)) for p in parts if p) + framing
    assert ctx.history, "some history fits"
    assert real <= ctx.token_budget.available


def test_stored_counts_name_their_tokenizer_and_are_used_by_it(tmp_path: Path) -> None:
    db = str(tmp_path / "ledger.db")
    recorder = make_assembler(config(db), plugins=[("ledger", plugin)])
    with LedgerSession(recorder) as ls:
        tid = ls.record_turn(recorder.request("q"), [Message.of("user", "hello there")])
        assert ls.ledger.turn(tid).counted_by == "o200k_base"
    recorder.close()
    with Ledger.open(db) as w:  # counts no tokenizer would give, to see which are used
        w.append_turn(
            "s",
            [Message.of("user", "one two three"), Message.of("assistant", "four five")],
            message_tokens=[70, 90],
            total_tokens=160,
            counted_by="o200k_base",
        )
    for model, trusted in (("gpt-4o", True), ("gpt-4", False)):
        a = make_assembler(config(db, model), plugins=[("ledger", plugin)])
        ctx = a.assemble(a.request("hi"))
        a.close()
        tokens = [b.tokens for b in ctx.report.blocks if b.id.startswith("ledger:")][-2:]
        assert (tokens == [70, 90]) is trusted, (model, tokens)

"""Text that defeats tiktoken's regex (a run of about a million blanks): counted exactly, cut
like any oversized result, never a traceback.

The reference is tiktoken's own algorithm spelled out: the encoding's pattern split by the
``regex`` package (a different engine, which does not overflow), then BPE on each piece.
"""

from __future__ import annotations

import itertools
import os
import subprocess
import sys

import pytest
import regex
from hypothesis import given, settings
from hypothesis import strategies as st

from lamina import Block, Message, ToolCallPart, ToolResultPart, count_parts
from lamina.testing import StaticProvider, make_assembler
from lamina.tokens import ORDINARY_LIMIT, TiktokenTokenizer, cut_blank_runs, load_encoding
from lamina.truncation import truncate_end, truncate_middle, truncate_start

ENCODINGS = ("o200k_base", "cl100k_base")
#: The reproduction's tool result: one run of 1.1M spaces between two bars.
WIDE = "|" + " " * 1_100_000 + "|"


def reference_ids(name: str, text: str) -> list[int]:
    enc = load_encoding(name)
    pieces = regex.findall(enc._pat_str, text)
    return [t for piece in pieces for t in enc._encode_single_piece(piece)]


@pytest.mark.parametrize("name", ENCODINGS)
def test_the_reference_is_tiktoken_on_ordinary_text(name: str) -> None:
    text = "Hello,  world!\n\n  indented\tcode = 42;   // trailing   \r\n日本語 🦜 it's"
    assert reference_ids(name, text) == load_encoding(name).encode_ordinary(text)


@pytest.mark.parametrize("name", ENCODINGS)
def test_a_million_spaces_count_exactly(name: str) -> None:
    tok = TiktokenTokenizer(name)
    expected = len(reference_ids(name, WIDE))
    assert tok.count(WIDE) == expected
    bounds = tok.boundaries(WIDE)
    assert len(bounds) == expected
    assert bounds[0] == 0 and bounds[-1] == len(WIDE) - 2  # the last token is " |"
    assert all(a <= b for a, b in itertools.pairwise(bounds))


@pytest.mark.parametrize(
    "text",
    [
        "x" + " " * 1_100_000,  # ends the text
        "a;\n" + "\t" * 1_100_000 + "word",  # after a newline, before a letter
        "\u3000\xa0" * 600_000 + "7 " + " " * 1_000_001 + "\n\n",  # two runs; one ends in newlines
    ],
)
def test_other_long_blank_runs_count_exactly(text: str) -> None:
    tok = TiktokenTokenizer("o200k_base")
    assert tok.count(text) == len(reference_ids("o200k_base", text))


@pytest.mark.parametrize("name", ENCODINGS)
def test_the_fast_path_has_room_to_spare(name: str) -> None:
    """Texts shorter than ``ORDINARY_LIMIT`` take tiktoken's ``encode_ordinary``, which panics
    where its regex fails: this tiktoken still splits a run twice that long."""
    text = "|" + " " * (2 * ORDINARY_LIMIT) + "|"
    assert len(load_encoding(name)._core_bpe.encode_ordinary(text)) == len(
        reference_ids(name, text)
    )


BLANKS = " \t\u3000\xa0"
ALPHABET = st.sampled_from([*BLANKS, "\n", "\r", "a", "Z", "é", "日", "1", "|", "/", ".", "'"])


@st.composite
def blanky_text(draw: st.DrawFn) -> str:
    """Text with runs of blanks between short stretches of anything else."""
    parts = draw(
        st.lists(
            st.one_of(
                st.text(ALPHABET, max_size=6),
                st.builds(lambda c, n: c * n, st.sampled_from(BLANKS), st.integers(1, 12)),
            ),
            max_size=12,
        )
    )
    return "".join(parts)


@settings(max_examples=300, deadline=None)
@given(name=st.sampled_from(ENCODINGS), text=blanky_text(), run=st.integers(2, 6))
def test_cutting_blank_runs_gives_tiktokens_tokens(name: str, text: str, run: int) -> None:
    """The cut is exact at any run length, so the short runs hypothesis draws stand for the
    million-blank ones tiktoken cannot encode."""
    enc = load_encoding(name)
    segments = cut_blank_runs(
        text,
        enc.encode_ordinary,
        enc._encode_single_piece,
        at_end=name == "o200k_base",
        run=run,
    )
    assert [t for s in segments for t in s] == enc.encode_ordinary(text)


def test_text_tiktoken_cannot_encode_is_charged_one_token_per_byte(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Should tiktoken fail where no cut helps, the count is an upper bound and cutting works."""
    tok = TiktokenTokenizer("o200k_base", small_until=None)

    class Failing:
        def encode(self, text: str, allowed: object) -> list[int]:
            raise ValueError("Regex error while tokenizing")

        def encode_ordinary(self, text: str) -> list[int]:
            raise ValueError("Regex error while tokenizing")

    monkeypatch.setattr(tok, "_core", Failing())
    text = "naïve café 🦜 " * 5
    assert tok.count(text) == len(text.encode("utf-8")) >= len(reference_ids("o200k_base", text))
    bounds = tok.boundaries(text)
    assert len(bounds) == tok.count(text) and bounds == sorted(bounds)
    assert all(0 <= b < len(text) for b in bounds)
    cut = truncate_end(text, 40, tok)
    assert cut is not None and tok.count(cut) <= 40


@pytest.mark.parametrize("truncate", [truncate_end, truncate_start, truncate_middle])
def test_a_million_spaces_are_cut_to_fit(truncate) -> None:
    tok = TiktokenTokenizer("o200k_base")
    cut = truncate(WIDE, 300, tok)
    assert cut is not None
    assert len(reference_ids("o200k_base", cut)) == tok.count(cut) <= 300


def test_the_kernel_assembles_a_block_and_a_message_holding_a_million_spaces() -> None:
    history = [
        Block.text("u1", "session", "show me the report", role="user", group="t1"),
        Block(
            id="a1",
            layer="session",
            role="assistant",
            group="t1",
            content=(ToolCallPart(id="c1", name="report", arguments={}),),
        ),
        Block(
            id="r1",
            layer="session",
            role="tool",
            group="t1",
            content=(ToolResultPart(call_id="c1", content=WIDE),),
        ),
        Block.text("a2", "session", "done", role="assistant", group="t1"),
    ]
    exact = len(reference_ids("o200k_base", WIDE))
    config = {
        "model": "gpt-4o",
        "fit": {"minimum_recent": 0},
        "blocks": [{"id": "wide", "text": WIDE, "truncation": "end", "required": False}],
    }
    # Room for both: kept whole, the message counted exactly.
    roomy = make_assembler(
        {**config, "budget": {"max_tokens": 40_000}},
        plugins=[("turns", StaticProvider(history))],
    )
    ctx = roomy.assemble(roomy.request("next question"))
    reports = {r.id: r for r in ctx.report.blocks}
    assert reports["r1"].status == "kept" and reports["r1"].tokens == exact
    assert reports["wide"].status == "kept" and reports["wide"].tokens >= exact
    assert ctx.token_budget.used.total <= ctx.token_budget.available
    # Room for neither: the block is cut like any oversized one, the turn dropped.
    tight = make_assembler(
        {**config, "budget": {"max_tokens": 5_000}},
        plugins=[("turns", StaticProvider(history))],
    )
    ctx = tight.assemble(tight.request("next question"), verbose_report=True)
    reports = {r.id: r for r in ctx.report.blocks}
    assert reports["wide"].status == "truncated"
    assert reports["r1"].status == "dropped"
    assert ctx.token_budget.used.total <= ctx.token_budget.available
    assert len(reference_ids("o200k_base", ctx.system_prompt)) <= ctx.token_budget.available
    # A later assembly of the same assembler works too (nothing poisoned).
    assert tight.assemble(tight.request("and again")).token_budget.used.total > 0


def test_lamina_tokens_counts_a_million_spaces(tmp_path) -> None:
    path = tmp_path / "wide.txt"
    path.write_text(WIDE)
    out = subprocess.run(
        [sys.executable, "-m", "lamina", "tokens", "--model", "gpt-4o", str(path)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**os.environ, "LAMINA_PLUGINS": ""},
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith(f"{len(reference_ids('o200k_base', WIDE))} tokens (o200k_base")


def test_history_messages_count_exactly_through_the_counter() -> None:
    assembler = make_assembler({"model": "gpt-4o"})
    counter = assembler.model("gpt-4o").counter
    message = Message(role="tool", content=(ToolResultPart(call_id="c1", content=WIDE),))
    assert count_parts(message.content, counter.count) == len(reference_ids("o200k_base", WIDE))

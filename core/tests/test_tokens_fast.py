"""The fast exact counter (the ``lamina[fast]`` extra, quicktok) gives tiktoken's ids, and so
does the small-text counter (``lamina.small_counter``; its own tests in test_tokens_small.py).

Every code point in the contexts the split patterns tell apart (letters by case, marks,
numbers, blanks, the rest), the standard library's sources (about 25 MB, whole files and
random slices), every code point in runs, emoji sequences, runs of every blank and hostile
strings, then random text from hypothesis: wherever the fast counter answers, its ids are
tiktoken's; it declines only text holding a code point of ``FAST_UNLIKE`` (or a lone
surrogate). A ``FAST_VERSIONS`` entry rests on this file passing with those versions. Without
quicktok installed, only the fallback tests run: counting stays with tiktoken. The small-text
counter is held to the same corpus, where it answers (outside ``SMALL_UNLIKE``, lone
surrogates and pieces longer than ``LONG_PIECE`` bytes).
"""

from __future__ import annotations

import functools
import random
import sys
import sysconfig
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lamina import encodings, small_counter
from lamina.blank_runs import BLANKS
from lamina.small_counter import load_small
from lamina.tokens import ORDINARY_LIMIT, TiktokenTokenizer, load_encoding, load_fast

ENCODINGS = ("o200k_base", "cl100k_base")
ROOT = Path(__file__).resolve().parents[2]


def stdlib_sources() -> list[str]:
    root = Path(sysconfig.get_paths()["stdlib"])
    files = sorted(root.glob("*.py")) + sorted(root.glob("*/*.py"))
    return [f.read_text("utf-8", errors="replace") for f in files]


def unicode_sweep() -> Iterator[str]:
    """Every code point but surrogates, 512 at a time, alone and between words and spaces."""
    points = [chr(c) for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF]
    for start in range(0, len(points), 512):
        chunk = points[start : start + 512]
        yield "".join(chunk)
        yield " ".join(chunk)
        yield "x".join(chunk) + "'s " + "".join(chunk[::-1])


EMOJI = [
    "👩‍👩‍👧‍👦",
    "🏳️‍🌈",
    "🇯🇵🇫🇷🇺🇸",
    "👍🏽👍🏿",
    "1️⃣#️⃣",
    "❤️❤︎",
    "🧑🏻‍💻",
    "🦜" * 300,
    "a🦜b 🦜 c🦜\n🦜",
]


def hostile() -> Iterator[str]:
    yield from ("", " ", "\n", "\r\n", "\x00", "\ufeffBOM", "<|endoftext|>", "<|fim_prefix|>x")
    yield from EMOJI
    for blank in [*BLANKS.replace("\u2000-\u200a", ""), "\u2005", "\r", "\n", "\r\n"]:
        for n in (1, 2, 3, 7, 64, 257, 4095, 4096, 4097, 20_000):
            run = blank * n
            yield run
            yield run + "x"
            yield "x" + run
            yield "a" + run + "\n" + run + "b"
    for word in ("it's", "IT'S", "we'll", "they'VE", "I'd", "don't", "l'été", "'s's's"):
        yield word
        yield f" {word}{word} {word.upper()}\n"
    yield "".join(str(n) for n in range(2_000))
    yield "١٢٣٤٥٦٧٨٩٠ ۱۲۳ ०१२ 12,345.678e-9 0x1F 1_000"
    yield "e" + "\u0301" * 500 + " Z̸̧̛̪̬͓a͓̹̗l̷g̶o̸"
    yield "\u202eevil\u202c \u200f\u200e\u2066x\u2069"
    yield "CamelCaseHTTPServerXMLParser getURLForID __init__ snake_case_name"
    yield "https://example.com/a/b?c=d&e=%20f#g " * 50
    yield "QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVo=" * 100
    yield "de ad be ef 00 ff " * 200
    yield '{"a":[1,2,{"b":null}],"c":"\\u00e9\\n"}' * 100
    yield "a" * 100_000
    yield "!?.,;:" * 5_000
    yield "".join(chr(c) for c in range(0x20))
    yield "日本語のテキストと中文文本和한국어 텍스트 ไทย العربية עברית"


def unlike(text: str, ranges: tuple[tuple[int, int], ...] = encodings.FAST_UNLIKE) -> bool:
    return any(a <= ord(c) <= b for c in text for a, b in ranges)


def small_declines(name: str, text: str) -> bool:
    """Whether the small-text counter may decline ``text`` (see ``lamina.small_counter``)."""
    import regex

    return unlike(text, small_counter.SMALL_UNLIKE) or any(
        len(piece.encode("utf-8", "surrogatepass")) > small_counter.LONG_PIECE
        or any(0xD800 <= ord(c) <= 0xDFFF for c in piece)
        for piece in regex.findall(small_counter.PATTERNS[name], text)
    )


def same_ids(
    name: str, texts: Iterator[str] | list[str], counter: str = "fast"
) -> tuple[int, list[str]]:
    """(texts checked, texts whose ids differ or that were declined without cause) for the
    fast counter or the small-text one."""
    enc = load_encoding(name)
    if counter == "fast":
        fast = load_fast(name)
        assert fast is not None, "quicktok is installed but not a proven version"
        count, encode, declines = fast.count, fast.tokenizer.encode_ordinary, unlike
    else:
        small = load_small(name)
        assert small is not None, "regex or tiktoken is not a proven version"
        count, encode = small.count, small.encode
        declines = functools.partial(small_declines, name)
    checked, wrong = 0, []
    for text in texts:
        answer = count(text)
        if answer is None:
            if not declines(text):
                wrong.append(text[:80])
        else:
            ids = encode(text)
            if ids != enc.encode_ordinary(text) or answer != len(ids):
                wrong.append(text[:80])
        checked += 1
    return checked, wrong


def probe(c: str) -> str:
    return f"{c}'s a{c}a A{c}a a{c}A {c}A {c}a 1{c}1 !{c}! {c}{c}{c} {c}\n{c} \t{c}\r\n"


@pytest.fixture(scope="module")
def sources() -> list[str]:
    return stdlib_sources()


@pytest.fixture(autouse=True)
def _fresh_fast_cache() -> Iterator[None]:
    load_fast.cache_clear()
    yield
    load_fast.cache_clear()


needs_small = pytest.mark.skipif(
    load_small("o200k_base") is None, reason="regex or tiktoken is not a proven version"
)


needs_quicktok = pytest.mark.skipif(
    encodings.load_fast("o200k_base") is None, reason="the lamina[fast] extra is not installed"
)


@needs_quicktok
@pytest.mark.parametrize("name", ENCODINGS)
def test_every_code_point_splits_alike_but_those_declined(name):
    """Each code point where quicktok's classes differ from tiktoken's is in ``FAST_UNLIKE``
    (256 probes at a time; a group that differs is looked at one by one)."""
    fast, enc = load_fast(name), load_encoding(name)
    assert fast is not None
    points = [chr(c) for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF]
    differ = []
    for start in range(0, len(points), 256):
        group = points[start : start + 256]
        text = "\n".join(map(probe, group))
        if fast.tokenizer.encode_ordinary(text) != enc.encode_ordinary(text):
            differ += [
                c
                for c in group
                if fast.tokenizer.encode_ordinary(probe(c)) != enc.encode_ordinary(probe(c))
            ]
    assert differ, "no difference left: FAST_UNLIKE can go"
    assert [hex(ord(c)) for c in differ if not unlike(c)] == []
    assert all(fast.count(probe(c)) is None for c in differ)


@needs_quicktok
@pytest.mark.parametrize("name", ENCODINGS)
def test_the_standard_library_gives_the_same_ids(name, sources):
    rng = random.Random(20260601)
    slices = []
    for text in rng.sample(sources, 300):
        a = rng.randrange(len(text) + 1)
        slices.append(text[a : a + rng.randrange(1, 5_000)])
    checked, wrong = same_ids(name, [*sources, *slices])
    assert checked > 1_300 and sum(map(len, sources)) > 20_000_000
    assert wrong == []


@needs_quicktok
@pytest.mark.parametrize("name", ENCODINGS)
def test_unicode_emoji_blanks_and_hostile_strings_give_the_same_ids(name):
    checked, wrong = same_ids(name, [*unicode_sweep(), *hostile()])
    assert checked > 6_000
    assert wrong == []


def split_ids(name: str, text: str) -> list[int]:
    """tiktoken's merges of the pieces the small-text counter's pattern splits ``text`` into:
    tiktoken's ids exactly when the ``regex`` module splits as tiktoken does."""
    import regex

    enc = load_encoding(name)
    pieces = regex.findall(small_counter.PATTERNS[name], text)
    return [i for piece in pieces for i in enc._encode_single_piece(piece.encode("utf-8"))]


@needs_small
@pytest.mark.parametrize("name", ENCODINGS)
def test_the_small_counter_splits_every_code_point_alike_but_those_declined(name):
    """Each code point the ``regex`` module's tables class otherwise than tiktoken's is in
    ``SMALL_UNLIKE`` (every code point in context and in runs; the split alone, merged by
    tiktoken: the merges are the next tests')."""
    import regex

    assert small_counter.PATTERNS[name] == load_encoding(name)._pat_str
    small, enc = load_small(name), load_encoding(name)
    assert small is not None
    points = [chr(c) for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF]
    differ = []
    for start in range(0, len(points), 256):
        group = points[start : start + 256]
        text = "\n".join(map(probe, group))
        if split_ids(name, text) != enc.encode_ordinary(text):
            differ += [
                c for c in group if split_ids(name, probe(c)) != enc.encode_ordinary(probe(c))
            ]
    assert differ, "no difference left: SMALL_UNLIKE can go"
    assert [hex(ord(c)) for c in differ if not unlike(c, small_counter.SMALL_UNLIKE)] == []
    assert all(small.count(probe(c)) is None for c in differ)
    runs = [text for text in unicode_sweep() if not unlike(text, small_counter.SMALL_UNLIKE)]
    assert len(runs) > 5_000
    assert [t[:20] for t in runs if split_ids(name, t) != enc.encode_ordinary(t)] == []
    assert regex.__version__ in {r for r, _ in small_counter.SMALL_VERSIONS}


@needs_small
@pytest.mark.parametrize("name", ENCODINGS)
def test_the_small_counter_gives_the_standard_librarys_ids(name, sources):
    rng = random.Random(20261125)
    slices = []
    for text in rng.sample(sources, 300):
        a = rng.randrange(len(text) + 1)
        slices.append(text[a : a + rng.randrange(1, 5_000)])
    checked, wrong = same_ids(name, slices, "small")  # ids
    assert checked == 300 and wrong == []
    small, enc = load_small(name), load_encoding(name)
    assert small is not None
    assert [small.count(text) for text in sources] == [len(enc.encode_ordinary(t)) for t in sources]


@needs_small
@pytest.mark.parametrize("name", ENCODINGS)
def test_the_small_counter_gives_the_ids_of_hostile_strings(name):
    texts = [*hostile(), "x\ud800y", "=" * 5_000, "ſ's K'K 'ſ 'S 'ſt", "\x1c\x1d\x1e\x1f \x85"]
    checked, wrong = same_ids(name, texts, "small")
    assert checked > 500 and wrong == []


SAMPLED = st.sampled_from(
    [
        *"aZé'sStT \t\n\r\xa0\u30001٣😀🏽\u200d\u0301_/ǅßİ",
        *("'ll", "'ſ", "<|endoftext|>", "  ", "日本", "!?", "\r\n"),
    ]
)


@needs_quicktok
@settings(max_examples=400, deadline=None)
@given(st.lists(st.one_of(SAMPLED, st.characters(exclude_categories=("Cs",))), max_size=80))
def test_random_text_gives_the_same_ids(parts):
    text = "".join(parts)
    for name in ENCODINGS:
        assert same_ids(name, [text]) == (1, [])


@needs_small
@settings(max_examples=400, deadline=None)
@given(st.lists(st.one_of(SAMPLED, st.characters(exclude_categories=("Cs",))), max_size=80))
def test_random_text_gives_the_same_ids_through_the_small_counter(parts):
    text = "".join(parts)
    for name in ENCODINGS:
        assert same_ids(name, [text], "small") == (1, [])


@needs_quicktok
def test_the_tokenizer_switches_after_fast_after_characters():
    tok = TiktokenTokenizer("o200k_base", fast_after=1_000)
    assert tok.count("x" * 999) == load_encoding("o200k_base").encode_ordinary("x" * 999).__len__()
    assert not tok.fast
    tok.count("y")
    assert tok.fast
    never = TiktokenTokenizer("o200k_base", fast_after=None)
    never.count("z" * 10_000)
    assert not never.fast
    assert TiktokenTokenizer("o200k_base").fast_after == 8_000_000


@needs_quicktok
def test_the_fast_tokenizer_counts_every_text_as_tiktoken_does():
    """Lone surrogates and text tiktoken's regex cannot split go tiktoken's exact way."""
    fast = TiktokenTokenizer("o200k_base", fast_after=0)
    slow = TiktokenTokenizer("o200k_base", fast_after=None)
    fast.count("")
    assert fast.fast
    texts = [
        *hostile(),
        *map(probe, "\u088f\U000187ff\U000323b0"),
        "x\ud800y \udfff",
        " " * 1_000_000 + "x",
        "ab " * (ORDINARY_LIMIT // 3 + 1),
    ]
    assert [fast.count(t) for t in texts] == [slow.count(t) for t in texts]


@needs_quicktok
def test_an_unproven_version_or_vocabulary_is_not_used(monkeypatch):
    import quicktok
    import tiktoken

    for module in (quicktok, tiktoken):
        monkeypatch.setattr(module, "__version__", "99.0.0")
        assert load_fast("o200k_base") is None
        monkeypatch.undo()
        load_fast.cache_clear()
    assert load_fast("o200k_base") is not None
    load_fast.cache_clear()
    file, _ = encodings.FAST_VOCABULARIES["o200k_base"]
    monkeypatch.setitem(encodings.FAST_VOCABULARIES, "o200k_base", (file, "0" * 64))
    assert load_fast("o200k_base") is None
    tok = TiktokenTokenizer("o200k_base", fast_after=0)
    assert tok.count("hello world") == 2 and tok.count("again") == 1 and not tok.fast


def test_without_quicktok_counting_stays_with_tiktoken(monkeypatch):
    monkeypatch.setitem(sys.modules, "quicktok", None)  # import quicktok raises ImportError
    assert load_fast("o200k_base") is None and load_fast("p50k_base") is None
    tok = TiktokenTokenizer("o200k_base", fast_after=0)
    assert [tok.count(t) for t in ("hello world", "x\ud800", "")] == [2, 2, 0]
    assert not tok.fast


def test_the_fast_extra_pins_a_proven_version():
    project = tomllib.loads((ROOT / "core" / "pyproject.toml").read_text("utf-8"))
    (pin,) = project["project"]["optional-dependencies"]["fast"]
    name, _, version = pin.partition("==")
    assert name == "quicktok-v1" and version in {q for q, _ in encodings.FAST_VERSIONS}

"""``lamina ledger stats SESSION --per-turn [--json] [--html]`` on a session with cache hits, a
cache bust, a compaction and a turn that stopped early: the table and the JSON list every turn;
the HTML page needs no network, escapes what comes from content, and in a real browser
(Debian's headless Chromium) shows the JSON's own numbers and draws the charts to scale."""

from __future__ import annotations

import json
import os
import re
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import lamina_ledger.plugin as plugin
import pytest
from click.testing import CliRunner
from lamina_ledger.cli import ledger_group
from lamina_ledger.ledger import Ledger
from lamina_ledger.prefix import compare, prefix_from
from lamina_ledger.session import LedgerSession
from lamina_ledger.stats import report_data, turn_report
from lamina_ledger.stats_page import SERIES, render_stats_html

from lamina import AssembledContext, Block, Message, ToolCallPart, ToolResultPart, Usage
from lamina.testing import StaticProvider, make_assembler
from lamina.testing.browser import (
    MISSING,
    Node,
    find_chromium,
    in_ci,
    parse,
    read_png,
    rendered,
    screenshot,
)

HOSTILE = '</script><img src=x onerror="alert(1)"><!-- &amp; \' </td>'


def exchange(n: int) -> list[Message]:
    """A turn: a question, a tool call and its (long) result, the answer."""
    call = ToolCallPart(id=f"call{n}", name="read", arguments={"path": f"src/mod{n}.py"})
    return [
        Message.of("user", f"What does src/mod{n}.py do?"),
        Message(role="assistant", content=(call,)),
        Message(role="tool", content=(ToolResultPart(call_id=f"call{n}", content="lorem " * 30),)),
        Message.of("assistant", f"Module {n} parses the config."),
    ]


class ProviderCache:
    """What a provider's prompt cache would report: input read from the cache up to where
    this request's stable prefix stops matching the last one's, the rest of it written."""

    def __init__(self) -> None:
        self.last: tuple[tuple[str, str, int], ...] = ()

    def usage(self, ctx: AssembledContext, n: int) -> Usage:
        prefix = prefix_from(ctx.report, ctx.tools)
        assert prefix is not None
        shared, _ = compare(self.last, prefix.blocks)
        cached = min(prefix.tokens, sum(tokens for _, _, tokens in prefix.blocks[:shared]))
        self.last = prefix.blocks
        return Usage(
            input_tokens=ctx.token_budget.used.total,
            cached_input_tokens=cached,
            cache_creation_tokens=prefix.tokens - cached,
            output_tokens=40 + 7 * n,
        )


def build_session(db: str, label: str = "support-42") -> None:
    """Twelve turns: the workspace rules change before turn 5 (a cache bust), turn 7 stops at
    its token limit, and a manual compaction comes after turn 8."""
    state = {"rules": "Answer briefly. Cite the file you read."}

    def blocks(_ctx: Any) -> list[Block]:
        return [
            Block.text("rules", "workspace", state["rules"] + " word" * 120),
            Block.text("persona", "persona", "You are Atlas, a careful operator." + " x" * 80),
        ]

    cfg = {
        "model": "gpt-4o",
        "session": label,
        "budget": {"max_tokens": 6000, "reserve_response": 0, "reserve_tools": 0},
        "plugins": {"ledger": {"database": db}},
    }
    a = make_assembler(cfg, plugins=[("ledger", plugin), ("rules", StaticProvider(blocks))])
    cache = ProviderCache()
    with a, LedgerSession(a) as s:
        s.start(label)
        for n in range(1, 13):
            if n == 5:
                state["rules"] = "Answer briefly, in French. Cite the file you read."
            req = a.request(f"question {n}: what does module {n} do?")
            ctx = s.assemble(req)
            extra: dict[str, Any] = {}
            if n == 7:
                extra = {"stop_reason": "max_tokens", "error": "cut at 4,096 tokens"}
            used = cache.usage(ctx, n)
            s.record_turn(req, exchange(n), usage=used, **extra)
            if n == 8:
                assert s.compact(a.request("compact"), share=0.08) is not None


@pytest.fixture(scope="module")
def ledger_db(tmp_path_factory: pytest.TempPathFactory) -> str:
    db = str(tmp_path_factory.mktemp("stats") / "ledger.db")
    build_session(db)
    return db


def cli(*args: str) -> str:
    out = CliRunner().invoke(ledger_group, list(args))
    assert out.exit_code == 0, out.output
    return out.stdout


@pytest.fixture(scope="module")
def stats_json(ledger_db: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(
        cli("stats", "support-42", "--per-turn", "--json", "-d", ledger_db)
    )
    return data


@pytest.fixture(scope="module")
def page(ledger_db: str, tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("page") / "stats.html"
    path.write_text(cli("stats", "support-42", "--html", "-d", ledger_db), "utf-8")
    return path


# -- the table and the JSON -----------------------------------------------------------------


def test_the_session_has_what_the_page_must_show(stats_json: dict[str, Any]) -> None:
    totals, turns = stats_json["totals"], stats_json["turns"]
    assert (totals["turns"], totals["compactions"], totals["cache_busts"]) == (12, 1, 1)
    assert totals["priced_turns"] == 12 and totals["cost"] > 0
    busts = [(t["number"], t["cache_bust"]) for t in turns if t["cache_bust"]]
    assert busts == [(5, {"block": "rules", "change": "changed"})]
    assert [t["number"] for t in turns if t["type"] == "compaction"] == [8]
    (stopped,) = (t for t in turns if t["stop_reason"] == "max_tokens")
    assert stopped["number"] == 7 and stopped["error"] == "cut at 4,096 tokens"
    normal = [t for t in turns if t["type"] == "normal"]
    # The cache hits, but for the first turn and the bust (its first block changed).
    assert [t["number"] for t in normal if not t["cached_input_tokens"]] == [1, 5]


def test_json_is_the_ledgers_own_report(ledger_db: str, stats_json: dict[str, Any]) -> None:
    with Ledger.open(ledger_db, readonly=True) as r:
        assert stats_json == json.loads(json.dumps(report_data(turn_report(r, "support-42"))))
    totals = json.loads(cli("stats", "support-42", "--json", "-d", ledger_db))
    assert totals == {"session": "support-42", "totals": stats_json["totals"]}


def test_the_per_turn_table_names_busts_compactions_and_stops(ledger_db: str) -> None:
    text = cli("stats", "support-42", "--per-turn", "-d", ledger_db)
    assert re.search(r"^cache busts +1$", text, re.M)
    lines = text.splitlines()
    (bust,) = (ln for ln in lines if "cache bust" in ln and ln.lstrip().startswith("5 "))
    assert "block 'rules' changed" in bust
    assert any(
        re.match(r"\s*- .*compaction \(manual\): [\d,]+ -> [\d,]+ tokens", ln) for ln in lines
    )
    (stop,) = (ln for ln in lines if "stopped" in ln)
    assert "stopped: max_tokens; error: cut at 4,096 tokens" in stop
    plain = cli("stats", "support-42", "-d", ledger_db)
    assert plain == text.split("\n\n")[0] + "\n"


def test_json_and_html_together_are_refused(ledger_db: str) -> None:
    out = CliRunner().invoke(
        ledger_group, ["stats", "support-42", "--json", "--html", "-d", ledger_db]
    )
    assert out.exit_code == 2 and "choose one" in out.output


# -- reading a page back ---------------------------------------------------------------------


def _int(text: str) -> int:
    return int(text.replace(",", ""))


def _opt(value: str, kind: type = int) -> Any:
    return None if value == "" else kind(value)


def page_figures(root: Node) -> dict[str, Any]:
    """Every figure on the page: the totals' data- attributes and visible text, each turn's
    table row, bars, ratio point and cost bar, and the markers."""
    main = root.by_id("stats")
    ints = ("turns", "compactions", "turns-with-usage", "input-tokens", "cached-input-tokens")
    ints += ("cache-creation-tokens", "output-tokens", "priced-turns", "cache-busts")
    totals = {k: int(main.attrs[f"data-{k}"]) for k in ints}
    totals["cache-hit-ratio"] = _opt(main.attrs["data-cache-hit-ratio"], float)
    totals["cost"] = _opt(main.attrs["data-cost"], float)
    spans = ("hit-ratio", "input-tokens", "cached-tokens", "written-tokens", "output-tokens")
    shown = {key: root.by_id(key).text() for key in (*spans, "total-cost")}
    rows = []
    for tr in root.by_id("turns").select(tag="tr"):
        if "data-turn" not in tr.attrs:
            continue
        a = tr.attrs
        cells = [td.text() for td in tr.select(tag="td")]
        rows.append(
            {
                "number": int(a["data-number"]),
                "turn_id": a["data-turn"],
                "type": a["data-type"],
                "input_tokens": _opt(a["data-input-tokens"]),
                "cached_input_tokens": _opt(a["data-cached-input-tokens"]),
                "cache_creation_tokens": _opt(a["data-cache-creation-tokens"]),
                "output_tokens": _opt(a["data-output-tokens"]),
                "cache_hit_ratio": _opt(a["data-cache-hit-ratio"], float),
                "cost": _opt(a["data-cost"], float),
                "prefix_tokens": _opt(a["data-prefix-tokens"]),
                "prefix_sha256": a["data-prefix-sha256"] or None,
                "cache_bust": a["data-cache-bust"] or None,
                "change": a["data-change"] or None,
                "stop_reason": a["data-stop-reason"] or None,
                "error": a["data-error"] or None,
                "cells": cells,
            }
        )
    bars = {
        int(g.attrs["data-number"]): [
            (r.attrs["class"].split()[1], int(r.attrs["data-tokens"])) for r in g.select(tag="rect")
        ]
        for g in root.by_id("chart-tokens").select("turn")
    }
    return {
        "totals": totals,
        "shown": shown,
        "rows": rows,
        "bars": bars,
        "ratios": {
            int(c.attrs["data-number"]): float(c.attrs["data-ratio"])
            for c in root.select("ratio-point")
        },
        "costs": {
            int(r.attrs["data-number"]): float(r.attrs["data-cost"])
            for r in root.by_id("chart-cost").select("cost")
        },
        "compactions": [
            int(g.attrs["data-after"]) for g in root.by_id("chart-tokens").select("compaction-mark")
        ],
        "busts": [
            (int(g.attrs["data-number"]), g.attrs["data-block"])
            for g in root.by_id("chart-tokens").select("bust-mark")
        ],
    }


def json_figures(data: dict[str, Any]) -> dict[str, Any]:
    """The same figures from ``lamina ledger stats --per-turn --json``."""
    t = data["totals"]
    normal = [x for x in data["turns"] if x["type"] == "normal"]
    rows = []
    for x in data["turns"]:
        bust = x["cache_bust"] or {}
        rows.append(
            {
                **{k: x[k] for k in ("number", "turn_id", "type", "input_tokens")},
                **{k: x[k] for k in ("cached_input_tokens", "cache_creation_tokens")},
                **{k: x[k] for k in ("output_tokens", "cache_hit_ratio", "cost")},
                **{k: x[k] for k in ("prefix_tokens", "prefix_sha256", "stop_reason", "error")},
                "cache_bust": bust.get("block"),
                "change": bust.get("change"),
            }
        )
    return {
        "totals": {
            k.replace("_", "-"): t[k]
            for k in (
                "turns",
                "compactions",
                "turns_with_usage",
                "input_tokens",
                "cached_input_tokens",
                "cache_creation_tokens",
                "output_tokens",
                "priced_turns",
                "cache_busts",
                "cache_hit_ratio",
                "cost",
            )
        },
        "rows": rows,
        "bars": {
            x["number"]: [
                ("cached", x["cached_input_tokens"]),
                ("written", x["cache_creation_tokens"]),
                (
                    "fresh",
                    x["input_tokens"] - x["cached_input_tokens"] - x["cache_creation_tokens"],
                ),
                ("output", x["output_tokens"]),
            ]
            for x in normal
        },
        "ratios": {x["number"]: x["cache_hit_ratio"] for x in normal},
        "costs": {x["number"]: x["cost"] for x in normal},
        "compactions": [x["number"] for x in data["turns"] if x["type"] == "compaction"],
        "busts": [(x["number"], x["cache_bust"]["block"]) for x in normal if x["cache_bust"]],
    }


def check_page(root: Node, data: dict[str, Any]) -> None:
    """The page's figures are the JSON's, in its attributes and in the text a person reads."""
    got, want = page_figures(root), json_figures(data)
    assert {k: got[k] for k in want if k != "rows"} == {k: want[k] for k in want if k != "rows"}
    assert [{k: v for k, v in r.items() if k != "cells"} for r in got["rows"]] == want["rows"]
    t = data["totals"]
    shown = got["shown"]
    assert shown["hit-ratio"] == f"{t['cache_hit_ratio']:.3f}"
    assert _int(shown["input-tokens"]) == t["input_tokens"]
    assert _int(shown["cached-tokens"]) == t["cached_input_tokens"]
    assert _int(shown["written-tokens"]) == t["cache_creation_tokens"]
    assert _int(shown["output-tokens"]) == t["output_tokens"]
    assert shown["total-cost"] == f"${t['cost']:,.6f}"  # rounded as printed
    for row, x in zip(got["rows"], data["turns"], strict=True):
        if x["type"] == "compaction":
            assert "compaction (manual)" in row["cells"][-1]
            continue
        number, _id, _model, *nums, _sha, note = row["cells"]
        assert int(number) == x["number"]
        keys = ("input_tokens", "cached_input_tokens", "cache_creation_tokens", "output_tokens")
        assert [_int(n) for n in nums[:4]] == [x[k] for k in keys]
        assert float(nums[4]) == pytest.approx(x["cache_hit_ratio"], abs=5e-4)
        assert nums[5] == f"${x['cost']:,.6f}"
        assert _int(nums[6]) == x["prefix_tokens"]
        if x["cache_bust"]:
            assert f"cache bust: block '{x['cache_bust']['block']}'" in note


def test_every_figure_on_the_page_is_the_stats(page: Path, stats_json: dict[str, Any]) -> None:
    check_page(parse(page.read_text("utf-8")), stats_json)


def test_the_page_needs_nothing_from_the_network(page: Path) -> None:
    text = page.read_text("utf-8")
    root = parse(text)
    assert not {n.tag for n in root.walk()} & {"script", "link", "img", "iframe", "object"}
    assert not re.search(r"(?:https?:)?//(?!www\.w3\.org/2000/svg)|url\(|@import", text)
    (csp,) = (n for n in root.walk() if n.attrs.get("http-equiv") == "Content-Security-Policy")
    assert csp.attrs["content"].startswith("default-src 'none'")


def test_content_on_the_page_stays_text(tmp_path: Path) -> None:
    db = str(tmp_path / "l.db")
    with Ledger.open(db) as w:
        from lamina_ledger.prefix import Prefix

        for n, block in enumerate(["a", HOSTILE]):
            p = Prefix(sha256="0" * 64, tokens=1, blocks=((block, "h", 1),))
            w.append_turn(HOSTILE, [], model=HOSTILE, error=HOSTILE, prefix=p, turn_id=f"t{n}")
        report = turn_report(w, HOSTILE)
    text = render_stats_html(report)
    root = parse(text)
    assert "<img" not in text and not any(k.startswith("on") for n in root.walk() for k in n.attrs)
    assert root.by_id("stats").attrs["data-session"] == HOSTILE
    assert HOSTILE in root.by_id("turns").text()
    assert page_figures(root)["busts"] == [(2, HOSTILE)]


# -- in a real browser -----------------------------------------------------------------------


@pytest.fixture(scope="module")
def chromium() -> str:
    found = find_chromium()
    if found is None:
        if in_ci():
            pytest.fail(f"the browser test cannot run in CI: {MISSING}")
        pytest.skip(MISSING)
    return found


def test_the_browser_shows_the_stats_numbers(
    chromium: str, tmp_path: Path, page: Path, stats_json: dict[str, Any]
) -> None:
    root = rendered(chromium, tmp_path, page)
    check_page(root, stats_json)
    assert root.by_id("chart-tokens").select(tag="rect") and root.by_id("chart-cost").select(
        tag="rect"
    )


def _colour(hex_colour: str) -> bytes:
    return bytes.fromhex(hex_colour.lstrip("#"))


def test_the_screenshot_draws_the_tokens_to_scale(
    chromium: str, tmp_path: Path, page: Path, stats_json: dict[str, Any]
) -> None:
    shot = screenshot(chromium, tmp_path, page, width=1200, height=1100)
    width, height, rows = read_png(shot.read_bytes())
    assert (width, height) == (1200, 1100)
    pixels = Counter(px for row in rows for px in row)
    assert len(pixels) > 100, "the screenshot is (nearly) one colour"
    assert pixels.most_common(1)[0][1] < 0.95 * width * height
    # Each token series covers the area its tokens call for (the bars share one scale).
    normal = [t for t in stats_json["turns"] if t["type"] == "normal"]
    tokens = {
        "cached": sum(t["cached_input_tokens"] for t in normal),
        "written": sum(t["cache_creation_tokens"] for t in normal),
        "fresh": sum(
            t["input_tokens"] - t["cached_input_tokens"] - t["cache_creation_tokens"]
            for t in normal
        ),
        "output": sum(t["output_tokens"] for t in normal),
    }
    drawn = {kind: pixels[_colour(colour)] for kind, _, colour in SERIES}
    per_token = sum(drawn.values()) / sum(tokens.values())
    for kind, n in drawn.items():
        assert abs(n - tokens[kind] * per_token) <= 0.03 * sum(drawn.values()) + 400, (kind, drawn)
    # The cache bust's marks over both charts (the legend's glyph alone is a few dozen) and
    # the compaction's dashed lines.
    assert pixels[_colour("#c62828")] > 120
    assert pixels[_colour("#a0561c")] > 150
    assert pixels[_colour("#7b4fb0")] > 2000  # the cost bars


def _screenshots() -> Iterator[Path]:
    """``LAMINA_SCREENSHOTS=docs/screenshots`` refreshes the documentation's screenshot."""
    folder = os.environ.get("LAMINA_SCREENSHOTS")
    if folder:
        yield Path(folder)


@pytest.mark.parametrize("folder", list(_screenshots()))
def test_refresh_the_documentations_screenshot(
    chromium: str, tmp_path: Path, page: Path, folder: Path
) -> None:
    shot = screenshot(chromium, tmp_path, page, width=1200, height=1000)
    (folder / "session-stats.png").write_bytes(shot.read_bytes())

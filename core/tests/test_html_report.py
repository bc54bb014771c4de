"""The HTML view of an assembly report (``lamina assemble --format html``): every figure on the
page is the report's own, hostile content stays text, the page needs no network, and in a
real browser (Debian's headless Chromium) the rendered page shows the report's numbers and
draws the budget bars to scale."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

import lamina
from lamina import Block
from lamina.html import esc, render_html
from lamina.html.page import PLACEMENT_COLORS
from lamina.model.blocks import Provenance
from lamina.serde import to_json
from lamina.testing import FakeModel, StaticProvider, make_assembler
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
from lamina.testing.history import turn, words

ROOT = Path(__file__).resolve().parents[2]
HOSTILE = '</script><img src=x onerror="alert(1)"><!-- &amp; \' </td></tr></table>'

# -- a context with every kind of block fate, a warning and hostile text ---------------------


def _first_sentence(blocks, max_tokens, tokenizer):
    return blocks[0].body.split(".")[0] + "."


class _Summaries:
    @lamina.hookimpl
    def lamina_summarizers(self):
        return [lamina.Summarizer(name="first-sentence", summarize=_first_sentence)]


def _broken(ctx):
    raise RuntimeError(f"backend said {HOSTILE}")


def rich_context():
    """Kept, truncated, summarized and dropped blocks, a failed provider's warning, and a
    block whose id, path and warning are markup."""
    blocks = [
        Block.text(
            "rules",
            "workspace",
            "Answer briefly. " + words(40),
            provenance=Provenance(path="AGENTS.md"),
        ),
        Block.text(
            HOSTILE,
            "persona",
            "You are Atlas. " + words(30),
            provenance=Provenance(path=f"p/{HOSTILE}.md"),
        ),
        *turn(1, "What changed in staging? " + words(30, 1), "The pool size. " + words(40, 2)),
        *turn(2, "And prod? " + words(30, 3), "Nothing yet. " + words(40, 4)),
        *turn(3, "Propose a fix. " + words(30, 5), "Raise the pool. " + words(30, 6)),
        *turn(4, "Is it safe? " + words(30, 10), "Yes, with a canary. " + words(30, 11)),
        Block.text(
            "mem:deploy",
            "memory",
            "The key rotates on Fridays. " + words(200, 7),
            summarizable=True,
            priority=0.2,
        ),
        Block.text("mem:notes", "memory", "Notes. " + words(120, 8), priority=0.3, max_tokens=60),
        Block.text(
            "mem:old", "memory", "Old notes. " + words(300, 9), priority=0.1, truncation="never"
        ),
    ]
    a = make_assembler(
        {
            "model": "fake-model",
            "fit": {"summarizer": "first-sentence", "minimum_recent": 1},
            "layers": {"memory": {"max_tokens": 450}},
        },
        plugins=[
            ("fake", FakeModel(context_window=2000, max_output=200)),
            ("fixture", StaticProvider(blocks)),
            ("summaries", _Summaries()),
            ("flaky", StaticProvider(_broken, name="search")),
        ],
    )
    with a:
        return a.assemble(a.request("Compare staging with prod.", max_tokens=960))


@pytest.fixture(scope="module")
def rich():
    ctx = rich_context()
    statuses = {b.status for b in ctx.report.blocks} | {"dropped" for _ in ctx.report.dropped}
    assert statuses == {"kept", "truncated", "summarized", "dropped"}, statuses
    assert ctx.report.warnings and HOSTILE in ctx.report.warnings[0]
    return ctx


# -- reading a page back (lamina.testing.browser: the standard library's parser) -------------


def _select(root, cls=None, **attrs):
    return iter(root.select(cls, **attrs))


def _by_id(root, ident):
    return root.by_id(ident)


def page_figures(root: Node) -> dict:
    """Every figure the page shows, read from its data- attributes."""
    main = _by_id(root, "report")
    ints = ("available", "used", "remaining", "model-limit", "reserve-response", "reserve-tools")

    def segs(bar_id, cls):
        return list(_select(_by_id(root, bar_id), cls))

    def blocks(nodes):
        return [
            (
                n.attrs["data-block"],
                n.attrs["data-layer"],
                n.attrs["data-status"],
                int(n.attrs["data-tokens"]),
                int(n.attrs["data-original-tokens"]),
            )
            for n in nodes
        ]

    def summed(nodes):
        return [
            (
                n.attrs["data-dropped"],
                int(n.attrs["data-blocks"]),
                n.attrs["data-first"],
                n.attrs["data-last"],
                int(n.attrs["data-original-tokens"]),
            )
            for n in nodes
            if "data-dropped" in n.attrs
        ]

    prefix = _by_id(root, "stable-prefix")
    dropped = segs("bar-dropped", "block") if any(_select(root, id="bar-dropped")) else []
    bar_blocks = blocks(segs("bar-block", "block"))
    listed = [n for n in dropped if "data-block" in n.attrs]
    bar_dropped = [(i, la, s, 0, t) for i, la, s, t, _ in blocks(listed)]
    rows = [n for n in _select(_by_id(root, "blocks")) if n.tag == "tr"]
    return {
        "budget": {k: int(main.attrs[f"data-{k}"]) for k in ints},
        "tokenizer": (main.attrs["data-tokenizer"], main.attrs["data-tokenizer-exact"]),
        "used": {
            n.attrs["data-placement"]: int(n.attrs["data-tokens"])
            for n in segs("bar-placement", "place")
        },
        "remaining": [
            int(n.attrs["data-tokens"])
            for n in _select(root, "remaining")
            if "data-tokens" in n.attrs
        ],
        "layer_bar": [
            (n.attrs["data-layer"], int(n.attrs["data-tokens"])) for n in segs("bar-layer", "layer")
        ],
        "layer_rows": [
            (
                n.attrs["data-layer"],
                int(n.attrs["data-tokens"]),
                int(n.attrs["data-original-tokens"]),
            )
            for n in _select(_by_id(root, "layers"), None)
            if n.tag == "tr" and "data-layer" in n.attrs
        ],
        "bar_blocks": sorted(bar_blocks + bar_dropped),
        "block_rows": blocks(n for n in rows if "data-block" in n.attrs),
        "bar_summed": summed(dropped),
        "summed_rows": summed(rows),
        "prefix": (int(prefix.attrs["data-tokens"]), prefix.attrs.get("data-sha256")),
        "warnings": [n.text() for n in _select(root, "warning")],
    }


def report_figures(data: dict) -> dict:
    """The same figures from an assembled context's JSON (``lamina assemble --format json``)."""
    budget, report = data["token_budget"], data["report"]
    used = budget["used"]
    summed = [
        (d["layer"], d["blocks"], d["first_id"], d["last_id"], d["original_tokens"])
        for d in ([] if report["verbose"] else report["dropped"])
    ]
    blocks = [
        (b["id"], b["layer"], b["status"], b["tokens"], b["original_tokens"])
        for b in report["blocks"]
    ]
    return {
        "budget": {
            "available": budget["available"],
            "used": used["total"],
            "remaining": budget["remaining"],
            "model-limit": budget["model_limit"],
            "reserve-response": budget["reserve_response"],
            "reserve-tools": budget["reserve_tools"],
        },
        "tokenizer": (report["tokenizer"]["name"], str(report["tokenizer"]["exact"]).lower()),
        "used": {
            "system": used["system_prompt"],
            "history": used["history"],
            "event": used["event"],
        },
        "remaining": [budget["remaining"]] * 3,
        "layer_bar": [(lr["layer"], lr["tokens"]) for lr in report["layers"]],
        "layer_rows": [
            (lr["layer"], lr["tokens"], lr["original_tokens"]) for lr in report["layers"]
        ],
        "bar_blocks": sorted(blocks),
        "block_rows": blocks,
        "bar_summed": summed,
        "summed_rows": summed,
        "prefix": (report["stable_prefix"]["tokens"], report["stable_prefix"]["sha256"]),
        "warnings": list(report["warnings"]),
    }


def _tags(root):
    return {n.tag for n in root.walk()}


# -- the page as written ----------------------------------------------------------------------


def test_every_figure_on_the_page_is_the_reports(rich):
    root = parse(render_html(rich))
    assert page_figures(root) == report_figures(json.loads(to_json(rich)))


def test_hostile_ids_paths_and_warnings_stay_text(rich):
    page = render_html(rich)
    root = parse(page)
    assert not _tags(root) & {"script", "img", "iframe", "object", "embed"}
    assert not any(k.startswith("on") for n in root.walk() for k in n.attrs)
    assert "<img" not in page and "</script>" not in page
    (row,) = (n for n in _select(root) if n.tag == "tr" and n.attrs.get("data-block") == HOSTILE)
    assert HOSTILE in row.text() and f"p/{HOSTILE}.md" in row.text()
    assert any(HOSTILE in w for w in page_figures(root)["warnings"])


_UNSAFE = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\ud800-\udfff]")


@given(st.text())
def test_any_text_reads_back_as_itself_in_text_and_attributes(text):
    root = parse(f'<p title="{esc(text)}">{esc(text)}</p><i>after</i>')
    p, i = (n for n in root.walk() if n.tag in ("p", "i"))
    shown = _UNSAFE.sub("\ufffd", text)
    assert p.attrs["title"] == shown and p.text() == shown and i.text() == "after"


def test_the_same_inputs_give_the_same_page():
    assert render_html(rich_context()) == render_html(rich_context())


def test_the_page_needs_nothing_from_the_network(rich):
    page = render_html(rich)
    root = parse(page)
    assert not _tags(root) & {"script", "link", "img", "iframe"}
    assert not re.search(r"(?:https?:)?//|url\(|@import", page.split("<body>")[0])
    csp = next(n for n in root.walk() if n.attrs.get("http-equiv") == "Content-Security-Policy")
    assert csp.attrs["content"].startswith("default-src 'none'")


def test_dropped_blocks_show_summed_per_layer_or_each_in_a_verbose_report():
    blocks = [Block.text(f"m{i}", "memory", words(60, i), priority=i / 10) for i in range(8)]
    blocks += [b for n in range(12) for b in turn(n, words(40, n), words(40, n + 20))]
    a = make_assembler(
        {
            "model": "gpt-4o",
            "budget": {"max_tokens": 900},
            "layers": {"memory": {"max_tokens": 150}},
        },
        plugins=[("fixture", StaticProvider(blocks))],
    )
    with a:
        summed = a.assemble(a.request("q"))
        each = a.assemble(a.request("q"), verbose_report=True)
    for ctx in (summed, each):
        figures = page_figures(parse(render_html(ctx)))
        assert figures == report_figures(json.loads(to_json(ctx)))
    assert {d.layer for d in summed.report.dropped} == {"memory", "session"}
    assert len(page_figures(parse(render_html(summed)))["bar_summed"]) == 2
    shown = page_figures(parse(render_html(each)))
    assert not shown["bar_summed"]
    assert sum(1 for b in shown["block_rows"] if b[2] == "dropped") == sum(
        d.blocks for d in each.report.dropped
    )


def test_a_context_without_warnings_or_stable_prefix_still_renders():
    a = make_assembler({"model": "gpt-4o"})
    with a:
        ctx = a.assemble(a.request("hi"))
    root = parse(render_html(ctx))
    assert page_figures(root) == report_figures(json.loads(to_json(ctx)))
    assert "None." in _by_id(root, "warnings").text()


# -- the command line -------------------------------------------------------------------------

CONFIG = f"""
model = "gpt-4o"
[[blocks]]
id = "rules"
text = "Always answer in French. {words(30)}"
[[blocks]]
id = {json.dumps(HOSTILE)}
layer = "memory"
text = "{words(400, 1)}"
priority = 0.1
truncation = "never"
[[blocks]]
id = "notes"
layer = "memory"
text = "{words(200, 2)}"
max_tokens = 40
[[blocks]]
id = "facts"
layer = "memory"
text = "The pool size is 20."
"""


def lamina_cli(*args, cwd):
    env = {**os.environ, "LAMINA_PLUGINS": ""}
    return subprocess.run(
        [sys.executable, "-m", "lamina", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=120,
    )


@pytest.fixture(scope="module")
def cli_pages(tmp_path_factory):
    """The CLI's HTML page and its JSON, for the same request."""
    folder = tmp_path_factory.mktemp("cli")
    (folder / "lamina.toml").write_text(CONFIG)
    args = (
        "assemble",
        "-m",
        "Bonjour",
        "--time",
        "2026-03-01T09:00:00+00:00",
        "--max-tokens",
        "300",
    )
    out = {}
    for fmt in ("html", "json"):
        proc = lamina_cli(*args, "--format", fmt, cwd=folder)
        assert proc.returncode == 0, proc.stderr
        assert proc.stderr == ""
        out[fmt] = proc.stdout
    page = folder / "page.html"
    page.write_text(out["html"], "utf-8")
    data = json.loads(out["json"])
    assert {b["status"] for b in data["report"]["blocks"]} >= {"kept", "truncated"}
    assert data["report"]["dropped"]
    return page, data


def test_cli_writes_the_page_with_the_reports_figures(cli_pages):
    page, data = cli_pages
    assert page_figures(parse(page.read_text("utf-8"))) == report_figures(data)


# -- in a real browser ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def chromium():
    found = find_chromium()
    if found is None:
        if in_ci():
            pytest.fail(f"the browser test cannot run in CI: {MISSING}")
        pytest.skip(MISSING)
    return found


def test_the_browser_shows_the_reports_figures(chromium, tmp_path, rich, cli_pages):
    page = tmp_path / "rich.html"
    page.write_text(render_html(rich), "utf-8")
    for path, data in ((page, json.loads(to_json(rich))), cli_pages):
        root = rendered(chromium, tmp_path, path)
        assert page_figures(root) == report_figures(data)
        assert not _tags(root) & {"script", "img"}
        budget = data["token_budget"]
        summary = next(_select(root, "summary")).text()
        assert f"{budget['used']['total']:,} of {budget['available']:,} tokens used" in summary
        assert data["report"]["tokenizer"]["name"] in _by_id(root, "tokenizer").text()
    # The hostile id shows as its own text in the table, never as markup.
    root = rendered(chromium, tmp_path, page)
    rows = [n for n in _select(root) if n.tag == "tr" and n.attrs.get("data-block") == HOSTILE]
    assert len(rows) == 1 and HOSTILE in rows[0].text()


def test_the_screenshot_draws_the_budget_to_scale(chromium, tmp_path, rich):
    page = tmp_path / "rich.html"
    page.write_text(render_html(rich), "utf-8")
    shot = screenshot(chromium, tmp_path, page, width=1200, height=900)
    width, height, rows = read_png(shot.read_bytes())
    assert (width, height) == (1200, 900)
    pixels = Counter(px for row in rows for px in row)
    assert len(pixels) > 100, "the screenshot is (nearly) one colour"
    assert pixels.most_common(1)[0][1] < 0.95 * width * height
    # The physical-layer bar: each segment's width in pixels is its share of the tokens.
    colours = {p: bytes.fromhex(c[1:]) for p, c in PLACEMENT_COLORS.items()}
    counts = max(([row.count(c) for c in colours.values()] for row in rows), key=sum)
    used = rich.token_budget.used
    tokens = [used.system_prompt, used.history, used.event]
    assert all(counts), counts
    per_token = sum(counts) / sum(tokens)
    for (name, n), t in zip(zip(colours, counts, strict=True), tokens, strict=True):
        assert abs(n - t * per_token) <= 3, (name, n, t * per_token)
    # Status patterns are drawn: the dropped block's hatching appears.
    assert pixels[bytes.fromhex("9aa1ad")] > 500

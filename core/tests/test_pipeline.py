"""The assembly pipeline: placement, compression order, guarantees, providers, wrappers."""

from __future__ import annotations

import json
import threading
from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

import lamina
from lamina import Block, BudgetError, ConfigError, ProviderError, Tool
from lamina.assembly.state import milliseconds
from lamina.serde import to_json, unstructure
from lamina.testing import StaticProvider, make_assembler
from lamina.testing.history import tool_turn, turn, words
from lamina.tokens import TiktokenTokenizer

O200K = TiktokenTokenizer("o200k_base")
#: OpenAI's chat framing the kernel charges for gpt-4o and gpt-4: per message, and priming the reply.
MESSAGE_FRAMING, REPLY_FRAMING = 4, 3


def build(blocks, **config):
    config.setdefault("model", "gpt-4o")
    config.setdefault("budget", {"reserve_response": 0, "reserve_tools": 0})
    return make_assembler(config, plugins=[("fixture", StaticProvider(blocks))])


def statuses(ctx):
    return {b.id: b.status for b in ctx.report.blocks}


def test_layers_land_in_their_physical_layers():
    blocks = [
        Block.text("rules", "workspace", "Rule one.", trusted=True),
        Block.text("soul", "persona", "I am Atlas.", trusted=True),
        *turn(1, "hi", "hello"),
        Block.text("mem", "memory", "User likes tea.", title="Memory"),
    ]
    ctx = build(blocks).assemble(build(blocks).request("what now?"))
    assert ctx.system_prompt.index("Rule one.") < ctx.system_prompt.index("I am Atlas.")
    assert [m.role for m in ctx.history] == ["user", "assistant"]
    assert [m.text for m in ctx.history] == ["hi", "hello"]
    current = ctx.current_message.text
    assert (
        current.index("User likes tea.")
        < current.index("Current time:")
        < current.index("what now?")
    )
    assert current.endswith("what now?")
    assert "User likes tea." not in ctx.system_prompt


def test_placement_is_configurable():
    blocks = [Block.text("mem", "memory", "User likes tea.", title="Memory"), *turn(1, "hi", "yo")]
    a = build(blocks, placement={"memory": "before_history"})
    ctx = a.assemble(a.request("q"))
    assert "User likes tea." in ctx.history[0].text
    assert "User likes tea." not in ctx.current_message.text
    a = build(blocks, layers={"memory": {"placement": "system"}})
    assert "User likes tea." in a.assemble(a.request("q")).system_prompt


def test_memory_is_cut_before_history():
    blocks = [*turn(1, words(60), words(60, 1)), Block.text("mem", "memory", words(200, 2))]
    a = build(blocks)
    full = a.assemble(a.request("q")).token_budget.used.total
    a = build(blocks, budget={"max_tokens": full - 50, "reserve_response": 0, "reserve_tools": 0})
    ctx = a.assemble(a.request("q"))
    st = statuses(ctx)
    assert st["mem"] in ("truncated", "dropped")
    assert st["t1:u"] == st["t1:a"] == "kept"
    assert ctx.token_budget.used.total <= full - 50


def test_required_blocks_are_never_cut_and_budget_error_says_by_how_much():
    blocks = [Block.text("rules", "workspace", words(300), trusted=True)]
    a = build(blocks, budget={"max_tokens": 100, "reserve_response": 0, "reserve_tools": 0})
    with pytest.raises(BudgetError) as info:
        a.assemble(a.request("q"))
    assert info.value.available == 100
    assert f"over by {info.value.overage}" in str(info.value)
    # The rules alone are larger than the budget: the overage is at least their excess.
    assert info.value.overage >= O200K.count(words(300)) - 100


def test_history_cut_keeps_minimum_recent_turns_and_marks_the_gap():
    blocks = [b for n in range(12) for b in turn(n, words(40, n), words(40, n + 50))]
    a = build(
        blocks,
        budget={"max_tokens": 1200, "reserve_response": 0, "reserve_tools": 0},
        fit={"strategy": "truncateMiddle", "minimum_recent": 4},
    )
    ctx = a.assemble(a.request("q"))
    texts = [m.text for m in ctx.history]
    # The last four turns are all there, verbatim.
    for n in range(8, 12):
        assert words(40, n) in texts and words(40, n + 50) in texts
    # The first turn is kept (truncateMiddle keeps the beginning) and a marker stands in the gap.
    assert texts[0] == words(40, 0)
    markers = [t for t in texts if "earlier messages omitted" in t]
    assert len(markers) == 1
    assert ctx.token_budget.used.total <= 1200
    assert len(texts) < 24


def test_rolling_window_drops_oldest_first():
    blocks = [b for n in range(10) for b in turn(n, words(40, n), words(40, n + 50))]
    a = build(
        blocks,
        budget={"max_tokens": 900, "reserve_response": 0, "reserve_tools": 0},
        fit={"strategy": "rollingWindow", "minimum_recent": 1},
    )
    ctx = a.assemble(a.request("q"))
    kept = [
        b.id
        for b in ctx.report.blocks
        if b.layer == "session" and b.status == "kept" and ":" in b.id and b.id.startswith("t")
    ]
    turns_kept = sorted({int(k[1:].split(":")[0]) for k in kept})
    assert turns_kept == list(range(10 - len(turns_kept), 10))
    assert 0 < len(turns_kept) < 10


def test_stop_at_limit_refuses_and_lists_what_would_go():
    blocks = [b for n in range(10) for b in turn(n, words(40, n), words(40, n + 50))]
    a = build(
        blocks,
        budget={"max_tokens": 600, "reserve_response": 0, "reserve_tools": 0},
        fit={"strategy": "stopAtLimit", "minimum_recent": 1},
    )
    with pytest.raises(BudgetError) as info:
        a.assemble(a.request("q"))
    assert "would have to go: t0:u, t0:a" in str(info.value)


def test_tool_calls_and_results_are_cut_together():
    blocks = [b for n in range(8) for b in tool_turn(n, f"read f{n}", words(80, n))]
    a = build(
        blocks,
        budget={"max_tokens": 500, "reserve_response": 0, "reserve_tools": 0},
        fit={"strategy": "rollingWindow", "minimum_recent": 1},
    )
    ctx = a.assemble(a.request("q"))
    calls = {p.id for m in ctx.history for p in m.content if isinstance(p, lamina.ToolCallPart)}
    results = {
        p.call_id for m in ctx.history for p in m.content if isinstance(p, lamina.ToolResultPart)
    }
    assert calls == results and calls


def test_layer_cap_keeps_one_layer_from_crowding_out_another():
    blocks = [Block.text(f"m{i}", "memory", words(50, i), priority=i / 10) for i in range(10)]
    a = build(blocks, layers={"memory": {"max_tokens": 200}})
    ctx = a.assemble(a.request("q"), verbose_report=True)
    memory = next(lr for lr in ctx.report.layers if lr.layer == "memory")
    assert memory.tokens <= 200 and memory.cap == 200
    st = statuses(ctx)
    # Lowest priority goes first.
    assert st["m0"] == "dropped" and st["m9"] == "kept"
    a = build(
        blocks,
        budget={"max_tokens": 2000, "reserve_response": 0, "reserve_tools": 0},
        layers={"memory": {"share": 0.1}},
    )
    memory = next(lr for lr in a.assemble(a.request("q")).report.layers if lr.layer == "memory")
    assert memory.tokens <= 200


def test_truncated_block_keeps_a_visible_marker_and_reports_before_and_after():
    blocks = [Block.text("log", "memory", words(400), truncation="start", priority=0.2)]
    a = build(blocks, layers={"memory": {"max_tokens": 120}})
    ctx = a.assemble(a.request("q"))
    rep = next(b for b in ctx.report.blocks if b.id == "log")
    assert rep.status == "truncated" and rep.strategy == "start"
    assert rep.tokens <= 120 < rep.original_tokens
    assert "[truncated …]" in ctx.current_message.text


def test_block_max_tokens_and_min_tokens():
    blocks = [
        Block.text("capped", "memory", words(300), max_tokens=50, truncation="end"),
        Block.text("tiny", "memory", words(300, 3), max_tokens=50, min_tokens=60, truncation="end"),
    ]
    a = build(blocks)
    report = a.assemble(a.request("q")).report
    st = {b.id: b for b in report.blocks}
    assert st["capped"].status == "truncated" and st["capped"].tokens <= 50
    assert "tiny" not in st  # dropped: in the per-layer summary, not listed one by one
    (memory,) = report.dropped
    assert (memory.first_id, memory.last_id, memory.blocks) == ("tiny", "tiny", 1)
    assert memory.reasons == ("larger than its max_tokens (50)",)


def test_same_inputs_give_identical_bytes():
    blocks = [
        Block.text("rules", "workspace", "Rules.", trusted=True),
        *(b for n in range(9) for b in turn(n, words(30, n), words(30, n + 9))),
    ]

    def once():
        a = build(blocks, budget={"max_tokens": 1000, "reserve_response": 0, "reserve_tools": 0})
        ctx = a.assemble(a.request("q"))
        assert ctx.report.dropped
        data = unstructure(ctx)
        data["report"]["timings_ms"] = {}
        return data

    assert once() == once()


def test_counts_are_memoized_across_assemblies():
    blocks = [b for n in range(20) for b in turn(n, words(30, n), words(30, n + 9))]
    a = build(blocks)
    a.assemble(a.request("first"))
    counter = a.model("gpt-4o").counter
    misses = counter.misses
    a.assemble(a.request("first"))
    assert counter.misses == misses  # nothing re-tokenized
    a.assemble(a.request("a different message"))
    assert counter.misses - misses <= 3  # only the new event text


def test_stable_prefix_extends_when_history_grows():
    rules = Block.text("rules", "workspace", "Rules.", trusted=True)
    one = [rules, *turn(1, "a", "b")]
    two = [*one, *turn(2, "c", "d")]
    c1 = build(one).assemble(build(one).request("x"))
    c2 = build(two).assemble(build(two).request("y"))
    assert c1.system_prompt == c2.system_prompt
    assert c2.history[: len(c1.history)] == c1.history
    assert c2.report.stable_prefix.tokens > c1.report.stable_prefix.tokens
    assert c1.report.stable_prefix.sha256 != c2.report.stable_prefix.sha256


def test_budget_follows_seed_000():
    a = build([], budget={"reserve_response": 4000, "reserve_tools": 8000})
    b = a.assemble(a.request("hi")).token_budget
    assert b.model_limit == 128_000
    assert b.available == 128_000 - 4000 - 8000
    assert b.used.total == b.used.system_prompt + b.used.history + b.used.event
    assert b.remaining == b.available - b.used.total
    current = a.assemble(a.request("hi")).current_message.text
    assert b.used.event == O200K.count(current) + MESSAGE_FRAMING + REPLY_FRAMING


def test_max_tokens_caps_available():
    a = build([])
    req = a.request("hi", max_tokens=5000)
    assert a.assemble(req).token_budget.available == 5000


def test_manager_gets_platform_context_worker_does_not():
    a = build([])
    kwargs = {
        "platform": "imessage",
        "platform_actions": ("react", "reply"),
        "channel": "dm",
        "time": datetime(2026, 5, 1, 12, 0, tzinfo=UTC),
        "timezone": "Europe/Paris",
    }
    manager = a.assemble(a.request("hi", role="manager", **kwargs)).current_message.text
    worker = a.assemble(a.request("hi", role="worker", **kwargs)).current_message.text
    assert "Platform: imessage" in manager and "Available actions: react, reply" in manager
    assert "Platform" not in worker and "Available actions" not in worker
    assert "Current time: 2026-05-01T14:00:00+02:00" in worker
    assert "Timezone: Europe/Paris" in worker


def test_hook_data_reaches_the_current_message():
    a = build([])
    text = a.assemble(
        a.request("hi", hook_data={"calendar": {"next": "standup"}})
    ).current_message.text
    assert 'Hook calendar: {"next": "standup"}' in text


def test_tools_are_filtered_by_permission():
    tools = (
        Tool(name="email-send", permission="email-send"),
        Tool(name="shell", permission="shell"),
        Tool(name="clock"),
    )
    a = build([])
    names = [
        t.name for t in a.assemble(a.request("hi", tools=tools, permissions=("email-*",))).tools
    ]
    assert names == ["email-send", "clock"]


def test_providers_run_concurrently():
    # Each provider waits for the other at a barrier: run one after the other, both would time out.
    barrier = threading.Barrier(2, timeout=5)

    def meet(name):
        def provide(ctx):
            barrier.wait()
            yield Block.text(name, "memory", name)

        return provide

    a = make_assembler(
        {"model": "gpt-4o"},
        plugins=[
            ("one", StaticProvider(meet("one"), name="one", required=True)),
            ("two", StaticProvider(meet("two"), name="two", required=True)),
        ],
    )
    ctx = a.assemble(a.request("q"))
    assert {"one", "two"} <= {b.id for b in ctx.report.blocks}


def test_optional_provider_failure_is_a_warning_required_is_an_error():
    def boom(ctx):
        raise RuntimeError("database is down")

    a = make_assembler({"model": "gpt-4o"}, plugins=[("flaky", StaticProvider(boom, name="flaky"))])
    ctx = a.assemble(a.request("q"))
    assert any("flaky" in w and "database is down" in w for w in ctx.report.warnings)
    a = make_assembler(
        {"model": "gpt-4o"}, plugins=[("flaky", StaticProvider(boom, name="flaky", required=True))]
    )
    with pytest.raises(ProviderError, match="flaky.*database is down"):
        a.assemble(a.request("q"))


def test_a_required_providers_own_error_names_its_plugin():
    """A required provider's ``LaminaError`` (a malformed file it reads, say) stops the
    assembly as it is, with the plugin that raised it named: in the message and in
    ``exc.plugin``. An error that already names a plugin keeps it."""

    def malformed(ctx):
        raise ConfigError("not valid YAML", file="rules.yml", key="rules")

    def named(ctx):
        exc = ConfigError("no rules", file="rules.yml")
        exc.plugin = "elsewhere"
        raise exc

    a = make_assembler(
        {"model": "gpt-4o"}, plugins=[("rules", StaticProvider(malformed, required=True))]
    )
    with pytest.raises(ConfigError) as info:
        a.assemble(a.request("q"))
    assert info.value.plugin == "rules" and info.value.key == "rules"
    assert str(info.value) == "plugin 'rules': rules.yml, key rules: not valid YAML"
    a = make_assembler(
        {"model": "gpt-4o"}, plugins=[("rules", StaticProvider(named, required=True))]
    )
    with pytest.raises(ConfigError, match="^plugin 'elsewhere': rules.yml: no rules$"):
        a.assemble(a.request("q"))


def test_slow_optional_provider_is_dropped_with_a_warning():
    release = threading.Event()

    def slow(ctx):
        release.wait(10)
        yield Block.text("late", "memory", "late")

    a = make_assembler(
        {"model": "gpt-4o"}, plugins=[("slow", StaticProvider(slow, name="slow", timeout=0.2))]
    )
    try:
        ctx = a.assemble(a.request("q"))
    finally:
        release.set()
        a.close()
    assert any("slow" in w and "timed out" in w for w in ctx.report.warnings)
    assert "late" not in {b.id for b in ctx.report.blocks}


def test_bad_blocks_from_a_required_provider_name_the_plugin():
    bad = [Block.text("x", "nowhere", "x")]
    a = make_assembler(
        {"model": "gpt-4o"}, plugins=[("odd", StaticProvider(bad, name="odd", required=True))]
    )
    with pytest.raises(ProviderError, match="plugin 'odd'.*unknown layer 'nowhere'"):
        a.assemble(a.request("q"))
    a = make_assembler(
        {"model": "gpt-4o"},
        plugins=[
            ("a", StaticProvider([Block.text("x", "memory", "x")], name="a", required=True)),
            ("b", StaticProvider([Block.text("x", "memory", "y")], name="b", required=True)),
        ],
    )
    with pytest.raises(ProviderError, match="'x' twice"):
        a.assemble(a.request("q"))


def test_bad_blocks_from_an_optional_provider_are_left_out_with_a_warning():
    blocks = [Block.text("fine", "memory", "fine"), Block.text("x", "nowhere", "x")]
    a = make_assembler({"model": "gpt-4o"}, plugins=[("odd", StaticProvider(blocks, name="odd"))])
    ctx = a.assemble(a.request("q"))
    assert any("odd" in w and "unknown layer 'nowhere'" in w for w in ctx.report.warnings)
    assert "fine" not in {b.id for b in ctx.report.blocks}  # all or nothing per provider


def test_a_provider_may_only_yield_the_layers_it_declares():
    class Declared:
        @lamina.hookimpl
        def lamina_layer_providers(self):
            return [
                lamina.LayerProvider(
                    name="mem",
                    layers=("memory",),
                    required=True,
                    provide=lambda ctx: [Block.text("s", "persona", "x")],
                )
            ]

    a = make_assembler({"model": "gpt-4o"}, plugins=[("declared", Declared())])
    with pytest.raises(ProviderError, match="layer 'persona', but declares only memory"):
        a.assemble(a.request("q"))


def test_required_block_over_its_own_cap_is_truncated_never_dropped():
    blocks = [Block.text("must", "workspace", words(200), max_tokens=40, truncation="never")]
    a = build(blocks)
    ctx = a.assemble(a.request("q"))
    assert words(200) in ctx.system_prompt
    assert any("'must'" in w and "kept whole" in w for w in ctx.report.warnings)


def test_reserves_larger_than_the_window_are_a_config_error():
    a = build([], model="gpt-4", budget={"reserve_response": 4096, "reserve_tools": 8192})
    with pytest.raises(lamina.ConfigError, match="key budget.*leave nothing"):
        a.assemble(a.request("q"))


def test_wrapper_can_inject_and_observe():
    seen = []

    class Tracer:
        @lamina.hookimpl(wrapper=True)
        def lamina_wrap_assembly(self, call):
            from attrs import evolve

            call.request = evolve(
                call.request, event=evolve(call.request.event, hook_data={"injected": "yes"})
            )
            result = yield
            seen.append(result.report.stable_prefix.tokens)
            return result

    a = make_assembler({"model": "gpt-4o"}, plugins=[("tracer", Tracer())])
    ctx = a.assemble(a.request("q"))
    assert "Hook injected: yes" in ctx.current_message.text
    assert seen == [ctx.report.stable_prefix.tokens]


def test_unknown_model_is_assumed_128k_with_a_warning_and_estimated():
    a = build([], model="mystery-model-7")
    ctx = a.assemble(a.request("hello"))
    assert ctx.token_budget.model_limit == 128_000
    assert any("mystery-model-7" in w for w in ctx.report.warnings)
    assert ctx.report.tokenizer.exact is False


def test_date_suffixed_models_are_normalized():
    a = build([], model="claude-sonnet-4-20250514")
    ctx = a.assemble(a.request("hello"))
    assert ctx.token_budget.model_limit == 200_000
    assert ctx.report.warnings == ()


def test_json_round_trip_of_an_assembled_context():
    blocks = [*tool_turn(1, "read it", "print('hi')"), Block.text("m", "memory", "note")]
    a = build(blocks)
    ctx = a.assemble(a.request("q", time=datetime(2026, 1, 1, tzinfo=UTC)))
    assert lamina.from_json(to_json(ctx), lamina.AssembledContext) == ctx


def test_adapters_are_resolved_and_build_payloads():
    class Echo:
        @lamina.hookimpl
        def lamina_adapters(self):
            return [
                lamina.Adapter(
                    name="echo",
                    build_request=lambda ctx, opts: {"system": ctx.system_prompt, **opts},
                    parse_usage=lambda resp: lamina.Usage(input_tokens=resp["in"]),
                )
            ]

    a = make_assembler({"model": "gpt-4o"}, plugins=[("echo", Echo())])
    ctx = a.assemble(a.request("q"))
    assert a.payload(ctx, "echo", temperature=0) == {"system": "", "temperature": 0}
    assert a.adapter("echo").parse_usage({"in": 7}).input_tokens == 7
    with pytest.raises(lamina.ConfigError, match="no adapter for provider 'nope'; installed: echo"):
        a.payload(ctx, "nope")


def test_stable_prefix_leaves_out_the_after_history_message():
    blocks = [*turn(1, "a", "b"), Block.text("mem", "memory", "changes every turn")]
    a = build(blocks, placement={"memory": "after_history"})
    with_memory = a.assemble(a.request("q"))
    assert "changes every turn" in with_memory.history[-1].text
    b = build(list(turn(1, "a", "b")))
    without = b.assemble(b.request("q"))
    assert with_memory.report.stable_prefix == without.report.stable_prefix


def test_summarizable_blocks_are_summarized_by_the_configured_summarizer():
    calls = []

    def first_sentence(blocks, max_tokens, tokenizer):
        calls.append((tuple(b.id for b in blocks), max_tokens))
        return blocks[0].body.split(".")[0] + "."

    class Summaries:
        @lamina.hookimpl
        def lamina_summarizers(self):
            return [lamina.Summarizer(name="first-sentence", summarize=first_sentence)]

    long = "The deploy key rotates on Fridays. " + words(300)
    blocks = [Block.text("old", "memory", long, summarizable=True, priority=0.1)]
    a = make_assembler(
        {
            "model": "gpt-4o",
            "fit": {"summarizer": "first-sentence"},
            "layers": {"memory": {"max_tokens": 60}},
        },
        plugins=[("fixture", StaticProvider(blocks)), ("summaries", Summaries())],
    )
    ctx = a.assemble(a.request("q"))
    report = next(b for b in ctx.report.blocks if b.id == "old")
    assert report.status == "summarized" and report.strategy == "first-sentence"
    assert "The deploy key rotates on Fridays." in ctx.current_message.text
    assert words(300) not in ctx.current_message.text
    assert calls and calls[0][0] == ("old",) and calls[0][1] <= 60


@pytest.mark.parametrize("failure", ["raises", "not text"])
def test_a_failing_summarizer_is_a_warning_and_the_block_is_cut_without_it(failure):
    def broken(blocks, max_tokens, tokenizer):
        if failure == "raises":
            raise ConnectionError("the summarizing model is down")
        return None

    class Summaries:
        @lamina.hookimpl
        def lamina_summarizers(self):
            return [lamina.Summarizer(name="llm-ish", summarize=broken)]

    blocks = [Block.text("old", "memory", words(300), summarizable=True, priority=0.1)]
    a = make_assembler(
        {
            "model": "gpt-4o",
            "fit": {"summarizer": "llm-ish"},
            "layers": {"memory": {"max_tokens": 60}},
        },
        plugins=[("fixture", StaticProvider(blocks)), ("summaries", Summaries())],
    )
    ctx = a.assemble(a.request("q"))
    report = next(b for b in ctx.report.blocks if b.id == "old")
    assert report.status in ("truncated", "dropped") and report.tokens <= 60
    assert any("summarizer 'llm-ish' failed on old" in w for w in ctx.report.warnings)


def test_unknown_summarizer_is_a_config_error():
    with pytest.raises(lamina.ConfigError, match="unknown summarizer 'llm'"):
        make_assembler({"fit": {"summarizer": "llm"}})


def test_progress_is_reported_per_phase():
    phases = []
    a = lamina.Assembler(lamina.LaminaConfig(), entry_points=False, progress=phases.append)
    a.assemble(a.request("hi"))
    assert phases == ["plan", "gather", "place", "measure", "fit", "format", "report"]
    ctx = a.assemble(a.request("hi again"))
    assert list(ctx.report.timings_ms) == phases[:7]
    for ms in ctx.report.timings_ms.values():
        assert ms >= 0 and ms == round(ms, 3)


@given(st.floats(min_value=0, max_value=1e5))
def test_phase_timings_are_milliseconds_to_the_microsecond(seconds):
    ms = milliseconds(seconds)
    assert ms == round(ms, 3)
    assert abs(ms - round(seconds * 1000, 3)) <= 0.001


def test_pytest_fixture_builds_isolated_assemblers(lamina_assembler):
    a = lamina_assembler({"model": "gpt-4"})
    ctx = a.assemble(a.request("hi"))
    assert ctx.report.tokenizer.name == "cl100k_base"
    assert "Current time: 2026-01-02T03:04:05+00:00" in ctx.current_message.text


@pytest.mark.parametrize(
    ("model", "response", "tools"),
    [("gpt-4o", 4096, 8192), ("gpt-4", 2048, 1024), ("gpt-3.5-turbo", 4096, 2048)],
)
def test_default_reserves_scale_with_the_model(model, response, tools):
    a = make_assembler({"model": model})
    budget = a.assemble(a.request("hi")).token_budget
    assert (budget.reserve_response, budget.reserve_tools) == (response, tools)
    assert budget.available == budget.model_limit - response - tools


class SuperAdditive:
    """A tokenizer where long text costs more per character than short text, so a joined
    prompt costs more than its measured pieces (as BPE merges across joins can)."""

    name = "super-additive"
    exact = True

    def count(self, text):
        return len(text) if len(text) < 200 else 2 * len(text)

    def boundaries(self, text):
        return list(range(len(text)))


class UsesSuperAdditive:
    @lamina.hookimpl(tryfirst=True)
    def lamina_tokenizer(self, model):
        return SuperAdditive()


def test_final_text_is_recounted_and_cut_until_it_fits():
    blocks = [Block.text(f"m{i}", "memory", "x" * 150, priority=0.5) for i in range(12)]
    a = make_assembler(
        {
            "model": "gpt-4o",
            "budget": {"max_tokens": 2000, "reserve_response": 0, "reserve_tools": 0},
        },
        plugins=[("fixture", StaticProvider(blocks)), ("tok", UsesSuperAdditive())],
    )
    ctx = a.assemble(a.request("q"))
    recount = SuperAdditive().count(ctx.current_message.text) + MESSAGE_FRAMING + REPLY_FRAMING
    assert recount == ctx.token_budget.used.event <= 2000
    # Measured piece by piece the memory blocks would have fitted; the recount forced more cuts.
    assert sum(d.blocks for d in ctx.report.dropped) >= 6


def test_strategy_can_be_overridden_per_call():
    blocks = [b for n in range(10) for b in turn(n, words(40, n), words(40, n + 50))]
    a = build(blocks, budget={"max_tokens": 900, "reserve_response": 0, "reserve_tools": 0})
    assert a.assemble(a.request("q")).report.strategy == "truncateMiddle"
    with pytest.raises(BudgetError, match="would have to go"):
        a.assemble(a.request("q"), strategy="stopAtLimit")
    with pytest.raises(lamina.ConfigError, match="unknown fit strategy 'nope'"):
        a.assemble(a.request("q"), strategy="nope")


def test_providers_can_warn_and_report_exclusions_and_pre_truncation():
    def provide(ctx):
        ctx.warn("index is stale")
        ctx.exclude(
            id="secret.env",
            layer="memory",
            reason="refused: outside the root",
            path="../secret.env",
        )
        yield Block.text("big", "memory", "first part", pre_truncated="read the first 1 KiB only")

    a = make_assembler({"model": "gpt-4o"}, plugins=[("src", StaticProvider(provide, name="src"))])
    ctx = a.assemble(a.request("q"))
    assert "plugin 'src': index is stale" in ctx.report.warnings
    reports = {b.id: b for b in ctx.report.blocks}
    assert reports["secret.env"].status == "dropped"
    assert reports["secret.env"].path == "../secret.env" and reports["secret.env"].plugin == "src"
    assert reports["big"].status == "truncated"
    assert reports["big"].reason == "read the first 1 KiB only"


def test_system_context_json_merges_the_system_blocks_provenance():
    blocks = [
        Block.text(
            "a",
            "workspace",
            "rules",
            provenance=lamina.Provenance(
                metadata={"context_json": {"workspace": {"agentsMdHash": "abc"}}}
            ),
        ),
        Block.text(
            "p",
            "persona",
            "soul",
            provenance=lamina.Provenance(metadata={"context_json": {"persona": {"id": "atlas"}}}),
        ),
        Block.text(
            "w2",
            "workspace",
            "user",
            provenance=lamina.Provenance(
                metadata={"context_json": {"workspace": {"userIdentityHash": "def"}}}
            ),
        ),
        Block.text(
            "m",
            "memory",
            "mem",
            provenance=lamina.Provenance(metadata={"context_json": {"memory": "not system"}}),
        ),
    ]
    ctx = build(blocks).assemble(build(blocks).request("q"))
    assert ctx.system_context_json == {
        "workspace": {"agentsMdHash": "abc", "userIdentityHash": "def"},
        "persona": {"id": "atlas"},
    }


def test_settings_and_summarizer_lookups():
    a = make_assembler({"model": "gpt-4o"})
    assert a.settings("static") is None
    with pytest.raises(lamina.ConfigError, match="no summarizer"):
        a.summarizer()


def test_parts_keep_their_type_tag_when_unstructured_as_declared():
    parts = (lamina.TextPart(text="a"), lamina.ToolCallPart(id="c", name="ls"))
    data = lamina.unstructure(parts, tuple[lamina.Part, ...])
    assert [d["type"] for d in data] == ["text", "tool_call"]
    assert lamina.structure(data, tuple[lamina.Part, ...]) == parts


def test_block_transforms_run_on_every_block_before_measuring():
    secret = "sk-test-" + "a" * 40

    def mask(block, ctx):
        if secret not in block.body:
            return block
        ctx.warn(f"masked a key in {block.id}")
        if block.text_part_index() is None:
            return block
        return block.with_text(block.body.replace(secret, "[key]"))

    class Masker:
        @lamina.hookimpl
        def lamina_block_transforms(self):
            return [lamina.BlockTransform(name="mask", transform=mask)]

    blocks = [
        Block.text("rules", "workspace", f"key: {secret}", trusted=True),
        *turn(1, f"my key is {secret}", "noted"),
    ]
    a = make_assembler(
        {"model": "gpt-4o"}, plugins=[("fixture", StaticProvider(blocks)), ("masker", Masker())]
    )
    ctx = a.assemble(a.request(f"use {secret}"))
    text = lamina.to_json(ctx)
    assert secret not in text
    assert "key: [key]" in ctx.system_prompt and ctx.history[0].text == "my key is [key]"
    assert ctx.current_message.text.endswith("use [key]")
    assert "plugin 'masker': masked a key in t1:u" in ctx.report.warnings
    # Counted as sent: the report's tokens are the masked block's.
    rules = next(b for b in ctx.report.blocks if b.id == "rules")
    assert rules.tokens == O200K.count("key: [key]") + O200K.count("\n\n")


def test_a_transform_that_breaks_the_contract_names_the_plugin():
    class Bad:
        @lamina.hookimpl
        def lamina_block_transforms(self):
            return [lamina.BlockTransform(name="bad", transform=lambda b, ctx: None)]

    a = make_assembler({"model": "gpt-4o"}, plugins=[("bad", Bad())])
    with pytest.raises(lamina.PluginError, match="plugin 'bad'.*must return the block"):
        a.assemble(a.request("q"))


def test_minimum_recent_and_reserve_response_can_be_overridden_per_call():
    blocks = [b for n in range(10) for b in turn(n, words(40, n), words(40, n + 50))]
    a = build(
        blocks,
        budget={"max_tokens": 1200, "reserve_response": 0, "reserve_tools": 0},
        fit={"strategy": "rollingWindow", "minimum_recent": 1},
    )
    with pytest.raises(BudgetError, match="the last 9 turns"):
        a.assemble(a.request("q"), minimum_recent=9)
    kept = a.assemble(a.request("q"))
    assert kept.report.dropped
    budget = a.assemble(a.request("q"), reserve_response=1000).token_budget
    assert budget.reserve_response == 1000
    assert budget.available == min(1200, budget.model_limit - 1000)
    with pytest.raises(lamina.ConfigError, match="minimum_recent must be >= 0"):
        a.assemble(a.request("q"), minimum_recent=-1)


def test_one_assembler_counts_each_model_with_its_own_tokenizer():
    blocks = list(turn(1, "Ünïcödé text with emoji 🦜 and code: x = [1, 2, 3]", "ok " * 30))
    a = build(blocks)
    for model, encoding in (
        ("gpt-4o", "o200k_base"),
        ("gpt-4", "cl100k_base"),
        ("gpt-4o", "o200k_base"),
    ):
        ctx = a.assemble(a.request("q", model=model))
        tok = TiktokenTokenizer(encoding)
        recount = sum(tok.count(m.text) + MESSAGE_FRAMING for m in ctx.history)
        assert ctx.token_budget.used.history == recount


class Recalibrating:
    """An estimate whose scale changes, announcing it through ``revision``."""

    name = "recalibrating"
    exact = False

    def __init__(self):
        self.scale, self.revision = 1, 0

    def count(self, text):
        return len(text) * self.scale

    def boundaries(self, text):
        return list(range(len(text)))


def test_a_tokenizer_revision_drops_memoized_counts():
    tok = Recalibrating()

    class Uses:
        @lamina.hookimpl(tryfirst=True)
        def lamina_tokenizer(self, model):
            return tok

    blocks = list(turn(1, "hello there", "general kenobi"))
    a = make_assembler(
        {"model": "gpt-4o"}, plugins=[("fixture", StaticProvider(blocks)), ("tok", Uses())]
    )
    framing = 2 * MESSAGE_FRAMING  # two history messages
    first = a.assemble(a.request("q")).token_budget.used.history - framing
    tok.scale, tok.revision = 2, 1
    second = a.assemble(a.request("q")).token_budget.used.history - framing
    assert second == 2 * first


def test_tool_definitions_count_with_the_system_prompt():
    tool = Tool(
        name="search",
        description="Search the docs",
        permission=None,
        input_schema={"type": "object", "properties": {"q": {"type": "string"}}},
    )
    a = build([Block.text("rules", "workspace", "Rules.", trusted=True)])
    plain = a.assemble(a.request("q"))
    with_tool = a.assemble(a.request("q", tools=(tool,)))
    definition = json.dumps(
        {"name": "search", "description": "Search the docs", "input_schema": tool.input_schema},
        sort_keys=True,
    )
    extra = O200K.count(definition)
    assert (
        with_tool.token_budget.used.system_prompt == plain.token_budget.used.system_prompt + extra
    )
    assert with_tool.report.stable_prefix.tokens == plain.report.stable_prefix.tokens + extra
    assert with_tool.report.stable_prefix.sha256 != plain.report.stable_prefix.sha256
    # A tool the caller may not have costs nothing.
    locked = Tool(name="shell", permission="shell")
    assert a.assemble(a.request("q", tools=(locked,))).token_budget == plain.token_budget

"""The conformance suite every provider adapter runs.

Subclass ``AdapterConformance`` in a test module (its name must start with ``Test``) and fill
in what it asks for: the adapter, a validator for the provider SDK's request type, model
names, and how to read system text, roles and tool calls back out of a payload. The suite
then checks system placement, role alternation, tool-call pairing, cache breakpoints (when
the adapter uses them), determinism, JSON round-trips, UTF-8 encoding of any text, tool-name
rules and non-object tool arguments over fixed, seeded random and generated conversations.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from typing import Any, ClassVar, Literal

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lamina.errors import ConfigError
from lamina.model import (
    AssembledContext,
    Message,
    Part,
    TextPart,
    Tool,
    ToolCallPart,
    ToolResultPart,
    Usage,
)
from lamina.records import Adapter
from lamina.testing.adapter_contexts import LONG_SYSTEM, SCENARIOS, make_context, random_history

__all__ = ["AdapterConformance", "ToolEvent"]

#: ``("call" | "result", tool call id, index of its message in ``roles``)``
ToolEvent = tuple[Literal["call", "result"], str, int]

#: Any text: lone surrogates (which ``st.characters`` leaves out unless asked), control
#: characters and private use included.
ANY_TEXT = st.text(
    st.characters(exclude_categories=()) | st.characters(categories=["Cs"]), max_size=30
)
#: Tool-call arguments as transcripts record them, objects or not.
ANY_ARGUMENTS = st.one_of(
    st.dictionaries(st.sampled_from(["path", "q"]), ANY_TEXT, max_size=2),
    ANY_TEXT,
    st.lists(st.integers(), max_size=3),
    st.integers(),
    st.booleans(),
    st.none(),
)
#: Recorded arguments that are not objects, each with text the payload must keep.
NON_OBJECT_ARGUMENTS: tuple[Any, ...] = (
    "ARG-plain-text",
    '{"path": "ARG-json-object-string"}',
    ["ARG-list-item", 2],
    7357,
    True,
    None,
)


class AdapterConformance:
    """Tests every adapter must pass. Subclass it (``class TestMyAdapter(AdapterConformance)``)
    and set or override what is marked *subclass*."""

    # subclass: the adapter under test, via ``make_adapter``
    #: subclass: models to build requests for
    models: ClassVar[tuple[str, ...]] = ()
    #: subclass: the provider name contexts carry
    provider: ClassVar[str] = ""
    #: whether roles must alternate (after reading them with ``roles``)
    requires_alternation: ClassVar[bool] = True
    #: whether the first conversational message must be the user's
    first_must_be_user: ClassVar[bool] = True
    #: whether the adapter sets cache breakpoints (then ``breakpoints`` must be implemented)
    uses_cache_breakpoints: ClassVar[bool] = False
    #: the most breakpoints the provider accepts
    max_breakpoints: ClassVar[int] = 4
    #: subclass: a response (object or JSON) and the usage it must parse to
    usage_samples: ClassVar[Sequence[tuple[Any, Usage]]] = ()
    #: subclass: errors that mean the context overflowed, and errors that do not
    overflow_errors: ClassVar[Sequence[Any]] = ()
    other_errors: ClassVar[Sequence[Any]] = ()
    #: whether the provider documents a rule for tool names (then names breaking it must raise
    #: ``ConfigError`` naming the tool); ``good_tool_names`` must pass, ``bad_tool_names`` not
    checks_tool_names: ClassVar[bool] = True
    good_tool_names: ClassVar[Sequence[str]] = ("read_file", "a", "get-weather_2", "x" * 64)
    bad_tool_names: ClassVar[Sequence[str]] = ("read file", "", "x" * 65, "tool!", "naïve")

    def make_adapter(self) -> Adapter:
        """subclass: the adapter under test."""
        raise NotImplementedError

    def validate(self, payload: dict[str, Any]) -> None:
        """subclass: raise unless ``payload`` is a valid request of the provider's SDK type."""
        raise NotImplementedError

    def system_text(self, payload: dict[str, Any]) -> str:
        """subclass: the system prompt as the payload carries it (natively or first message)."""
        raise NotImplementedError

    def roles(self, payload: dict[str, Any]) -> list[str]:
        """subclass: the conversational roles in order (``user``/``assistant``), system excluded."""
        raise NotImplementedError

    def tool_events(self, payload: dict[str, Any]) -> list[ToolEvent]:
        """subclass: every tool call and result in payload order, with the index (in what
        ``roles`` returns) of the message holding it."""
        raise NotImplementedError

    def breakpoints(self, payload: dict[str, Any]) -> int:
        """How many cache breakpoints are set (default: ``cache_control`` keys anywhere in the
        payload; override for a provider that marks them differently)."""
        return _count_key(payload, "cache_control")

    # helpers --------------------------------------------------------------------------

    def context(self, model: str, **kwargs: Any) -> AssembledContext:
        return make_context(model=model, provider=self.provider, **kwargs)

    def build(self, context: AssembledContext, **options: Any) -> dict[str, Any]:
        return self.make_adapter().build_request(context, options)

    def _all_contexts(self) -> Iterable[tuple[str, AssembledContext]]:
        for model in self.models:
            for name, history in SCENARIOS.items():
                yield f"{model}/{name}", self.context(model, history=history)
            for seed in range(12):
                yield f"{model}/random-{seed}", self.context(model, history=random_history(seed))

    # tests ----------------------------------------------------------------------------

    def test_declares_models(self) -> None:
        assert self.models, "set `models` to the model names to test"
        assert self.make_adapter().name

    def test_every_payload_validates(self) -> None:
        for label, context in self._all_contexts():
            payload = self.build(context)
            try:
                self.validate(payload)
            except Exception as exc:
                raise AssertionError(f"{label}: invalid payload: {exc}") from exc

    def test_validator_rejects_unknown_keys(self) -> None:
        payload = self.build(self.context(self.models[0]))
        self.validate(payload)
        with pytest.raises(Exception):  # noqa: B017 - any validation error will do
            self.validate({**payload, "lamina_not_a_field": True})

    def test_system_placement(self) -> None:
        for model in self.models:
            context = self.context(model, system="SYSTEM-MARKER rules", history=SCENARIOS["simple"])
            payload = self.build(context)
            assert self.system_text(payload) == "SYSTEM-MARKER rules"
            text = json.dumps(payload)
            assert text.count("SYSTEM-MARKER") == 1, "system prompt must appear exactly once"

    def test_alternation_and_first_role(self) -> None:
        for label, context in self._all_contexts():
            roles = self.roles(self.build(context))
            assert roles, label
            assert roles[-1] == "user", f"{label}: the current message must come last"
            if self.first_must_be_user:
                assert roles[0] == "user", f"{label}: starts with {roles[0]}"
            if self.requires_alternation:
                same = [i for i in range(1, len(roles)) if roles[i] == roles[i - 1]]
                assert not same, f"{label}: consecutive same-role messages at {same}: {roles}"

    def test_tool_calls_paired(self) -> None:
        for label, context in self._all_contexts():
            payload = self.build(context)
            events = self.tool_events(payload)
            roles = self.roles(payload)
            calls = {i: t for kind, i, t in events if kind == "call"}
            results = {i: t for kind, i, t in events if kind == "result"}
            assert len(calls) == sum(1 for e in events if e[0] == "call"), f"{label}: duplicate"
            assert len(results) == sum(1 for e in events if e[0] == "result"), f"{label}: duplicate"
            assert set(calls) == set(results), f"{label}: unpaired {set(calls) ^ set(results)}"
            for call_id, turn in calls.items():
                answer = results[call_id]
                assert roles[turn] == "assistant", label
                # the result answers in the very next turn: between them only more of the
                # same assistant turn (other calls as separate items), then user-side items
                between = "".join(
                    "a" if r == "assistant" else "u" for r in roles[turn + 1 : answer]
                )
                assert answer > turn and "a" not in between.lstrip("a"), (
                    f"{label}: result of {call_id} not in the turn right after its call"
                )

    def test_text_is_not_lost(self) -> None:
        for label, context in self._all_contexts():
            payload = json.dumps(self.build(context), ensure_ascii=False)
            for message in context.history:
                for part in message.content:
                    for text in _texts(part):
                        assert json.dumps(text, ensure_ascii=False)[1:-1] in payload, (
                            f"{label}: {text!r} missing from the payload"
                        )

    def test_deterministic_and_json(self) -> None:
        for label, context in self._all_contexts():
            first, second = self.build(context), self.build(context)
            encoded = json.dumps(first, sort_keys=False)
            assert encoded == json.dumps(second, sort_keys=False), label
            assert json.loads(encoded) == first, f"{label}: not plain JSON data"

    def test_static_prefix_stable(self) -> None:
        """Only the current message differs between two turns' payloads, at the end."""
        history = SCENARIOS["tool-round-trip"]
        for model in self.models:
            a = json.dumps(self.build(self.context(model, history=history, current="NOW-AAA")))
            b = json.dumps(self.build(self.context(model, history=history, current="NOW-BBB")))
            cut = a.index("NOW-AAA")
            assert a[:cut] == b[:cut], "the prefix before the current message changed"
            assert a.replace("NOW-AAA", "NOW-BBB") == b

    def test_cache_breakpoints(self) -> None:
        long_history = tuple(
            Message.of("user" if i % 2 == 0 else "assistant", f"turn {i} " * 300) for i in range(10)
        )
        for model in self.models:
            big = self.context(
                model,
                system=LONG_SYSTEM,
                history=long_history,
                system_tokens=5000,
                history_tokens=9000,
            )
            small = self.context(model, system="Short.", history=SCENARIOS["simple"])
            count = self.breakpoints(self.build(big))
            if not self.uses_cache_breakpoints:
                assert count == 0, f"{model}: breakpoints set by an adapter that declares none"
                continue
            assert 1 <= count <= self.max_breakpoints, f"{model}: {count} breakpoints"
            assert self.breakpoints(self.build(small)) == 0, (
                f"{model}: breakpoint below the minimum cacheable length"
            )

    def test_parse_usage(self) -> None:
        adapter = self.make_adapter()
        assert self.usage_samples, "set `usage_samples`"
        for response, expected in self.usage_samples:
            assert adapter.parse_usage(response) == expected

    # one ``@given`` method runs under every adapter's subclass: that is intended here
    @settings(
        max_examples=60, deadline=None, suppress_health_check=[HealthCheck.differing_executors]
    )
    @given(
        texts=st.lists(ANY_TEXT, min_size=8, max_size=8),
        arguments=ANY_ARGUMENTS,
        error=st.booleans(),
    )
    def test_any_text_encodes_as_utf8(self, texts: list[str], arguments: Any, error: bool) -> None:
        """Whatever the text (lone surrogates included), the payload encodes as UTF-8."""
        system, user, reply, result, current, description, name, media = texts
        call = ToolCallPart(id="call_1", name="read_file", arguments=arguments)
        history = (
            Message.of("user", user),
            Message(role="assistant", content=(TextPart(text=reply), call)),
            Message(
                role="tool",
                content=(ToolResultPart(call_id="call_1", content=result, is_error=error),),
            ),
            Message(role="tool", content=(ToolResultPart(call_id=name, content=media),)),
        )
        tool = Tool(
            name="read_file",
            description=description,
            input_schema={"type": "object", "properties": {"path": {"description": name}}},
        )
        for model in self.models:
            context = self.context(
                model, system=system, history=history, current=current, tools=(tool,)
            )
            payload = self.build(context)
            encoded = json.dumps(payload, ensure_ascii=False).encode("utf-8")
            assert json.loads(encoded) == payload

    def test_non_object_arguments_become_objects(self) -> None:
        """Arguments recorded as strings, lists, numbers or null still make a valid request,
        and what they held reaches the model."""
        for model in self.models:
            for arguments in NON_OBJECT_ARGUMENTS:
                call = ToolCallPart(id="call_1", name="read_file", arguments=arguments)
                history = (
                    Message.of("user", "Read it."),
                    Message(role="assistant", content=(call,)),
                    Message(role="tool", content=(ToolResultPart(call_id="call_1", content="x"),)),
                )
                payload = self.build(self.context(model, history=history))
                self.validate(payload)
                text = json.dumps(payload, ensure_ascii=False)
                for piece in re.findall(r"ARG-[a-z-]+|7357", json.dumps(arguments)):
                    assert piece in text, f"{model}: {arguments!r} lost"

    def test_tool_names_follow_the_provider_rule(self) -> None:
        if not self.checks_tool_names:
            pytest.skip("the provider documents no rule for tool names")
        for model in self.models:
            for name in self.good_tool_names:
                self.validate(self.build(self.context(model, tools=(Tool(name=name),))))
            for name in self.bad_tool_names:
                with pytest.raises(ConfigError, match=re.escape(repr(name))):
                    self.build(self.context(model, tools=(Tool(name=name),)))
                call = ToolCallPart(id="call_1", name=name)
                answered = (
                    Message(role="assistant", content=(call,)),
                    Message(role="tool", content=(ToolResultPart(call_id="call_1", content="x"),)),
                )
                with pytest.raises(ConfigError, match=re.escape(repr(name))):
                    self.build(self.context(model, history=answered, tools=()))

    def test_context_overflow(self) -> None:
        adapter = self.make_adapter()
        assert self.overflow_errors, "set `overflow_errors`"
        for error in self.overflow_errors:
            assert adapter.is_context_overflow(error), error
        for error in self.other_errors:
            assert not adapter.is_context_overflow(error), error


def _count_key(data: Any, key: str) -> int:
    if isinstance(data, dict):
        return (key in data) + sum(_count_key(v, key) for v in data.values())
    if isinstance(data, list):
        return sum(_count_key(v, key) for v in data)
    return 0


def _texts(part: Part) -> list[str]:
    if isinstance(part, TextPart):
        return [part.text] if part.text.strip() else []
    if isinstance(part, ToolResultPart):
        return [part.content]
    if isinstance(part, ToolCallPart):
        return [part.name]
    return []

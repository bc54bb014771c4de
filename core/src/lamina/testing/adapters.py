"""A conformance suite every provider adapter can run, and a strict request-type checker.

Subclass ``AdapterConformance`` in a test module (its name must start with ``Test``) and fill
in what it asks for: the adapter, a validator for the provider SDK's request type, model
names, and how to read system text, roles and tool calls back out of a payload. The suite
then checks system placement, role alternation, tool-call pairing, cache breakpoints (when
the adapter uses them), determinism and JSON round-trips over fixed and seeded random
conversations.

``strict_check(type_)`` checks plain JSON data against a ``TypedDict`` (or a pydantic model,
found by its ``model_fields``) recursively, rejecting keys the type does not declare: a
plain pydantic ``TypeAdapter`` ignores unknown keys in TypedDicts and validates nested
iterables lazily, so it alone cannot prove a payload is what the SDK declares.
"""

from __future__ import annotations

import json
import random
import types
import typing
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, ClassVar, Literal, Union, get_args, get_origin

import pytest

from lamina import (
    Adapter,
    AssembledContext,
    BudgetUsage,
    ImagePart,
    Message,
    ModelConfig,
    Part,
    TextPart,
    TokenBudget,
    Tool,
    ToolCallPart,
    ToolResultPart,
    Usage,
)

__all__ = ["AdapterConformance", "StrictTypeError", "make_context", "strict_check"]

#: ``("call" | "result", tool call id, index of its message in ``roles``)``
ToolEvent = tuple[Literal["call", "result"], str, int]


# -- strict checking of JSON data against SDK request types ---------------------------------


class StrictTypeError(AssertionError):
    """A payload does not match the declared request type; ``path`` says where."""

    def __init__(self, path: str, message: str, *, tag: bool = False) -> None:
        super().__init__(f"{path or '<root>'}: {message}")
        self.path = path
        #: a literal tag (``type``, ``role``…) did not match: the wrong alternative of a union
        self.tag = tag


def strict_check(type_: Any) -> Callable[[Any], None]:
    """A function raising ``StrictTypeError`` unless its argument matches ``type_`` exactly:
    declared keys only, required keys present, literals, scalars, lists and unions."""

    def check(value: Any) -> None:
        _check(value, type_, "")

    return check


def _strip(tp: Any) -> tuple[Any, tuple[Any, ...]]:
    """Drop ``Annotated``/``Required``/``NotRequired``/``ReadOnly`` wrappers; keep metadata."""
    meta: tuple[Any, ...] = ()
    while True:
        origin = get_origin(tp)
        name = getattr(origin, "_name", None) or getattr(origin, "__name__", None)
        if origin is typing.Annotated or name == "Annotated" or hasattr(tp, "__metadata__"):
            meta += tuple(getattr(tp, "__metadata__", ()))
            tp = tp.__origin__ if hasattr(tp, "__metadata__") else get_args(tp)[0]
        elif name in ("Required", "NotRequired", "ReadOnly"):
            tp = get_args(tp)[0]
        else:
            return tp, meta


def _is_typeddict(tp: Any) -> bool:
    return isinstance(tp, type) and hasattr(tp, "__required_keys__") and hasattr(tp, "__total__")


def _is_model(tp: Any) -> bool:
    return isinstance(tp, type) and isinstance(getattr(tp, "model_fields", None), dict)


def _alias(meta: tuple[Any, ...], key: str) -> str:
    for item in meta:
        alias = getattr(item, "alias", None)
        if isinstance(alias, str):
            return alias
    return key


def _check(value: Any, tp: Any, path: str) -> None:
    tp, _ = _strip(tp)
    if tp is Any or tp is object:
        return
    if isinstance(tp, typing.TypeVar | typing.ForwardRef | str):
        return
    if getattr(tp, "__value__", None) is not None and type(tp).__name__ == "TypeAliasType":
        _check(value, tp.__value__, path)
        return
    origin, args = get_origin(tp), get_args(tp)
    if origin is Union or origin is types.UnionType:
        _check_union(value, args, path)
    elif origin is Literal:
        if value not in args or type(value) not in {type(a) for a in args}:
            raise StrictTypeError(path, f"{value!r} is not one of {list(args)}")
    elif _is_typeddict(tp):
        _check_typeddict(value, tp, path)
    elif _is_model(tp):
        _check_model(value, tp, path)
    elif origin in (dict, Mapping, typing.Mapping) or tp in (dict, Mapping):
        if not isinstance(value, dict):
            raise StrictTypeError(path, f"expected an object, got {type(value).__name__}")
        if len(args) == 2:
            for key, item in value.items():
                _check(key, args[0], f"{path}.{key}")
                _check(item, args[1], f"{path}.{key}")
    elif origin in (list, tuple, Sequence, Iterable, typing.Iterable, typing.Sequence) or tp in (
        list,
        tuple,
    ):
        if not isinstance(value, list | tuple):
            raise StrictTypeError(path, f"expected a list, got {type(value).__name__}")
        item_type = args[0] if args else Any
        for i, item in enumerate(value):
            _check(item, item_type, f"{path}[{i}]")
    elif tp is type(None):
        if value is not None:
            raise StrictTypeError(path, f"expected null, got {value!r}")
    else:
        _check_scalar(value, tp, path)


def _check_scalar(value: Any, tp: Any, path: str) -> None:
    if tp is float:
        ok = isinstance(value, int | float) and not isinstance(value, bool)
    elif tp is int:
        ok = isinstance(value, int) and not isinstance(value, bool)
    elif tp is bytes:
        ok = isinstance(value, bytes | str)
    elif isinstance(tp, type):
        ok = isinstance(value, tp) or (
            # a pydantic model field typed as a class we cannot check from JSON (Path, bytes…)
            not tp.__module__.startswith("builtins") and isinstance(value, str)
        )
    else:
        ok = True
    if not ok:
        raise StrictTypeError(path, f"expected {getattr(tp, '__name__', tp)}, got {value!r}")


def _check_union(value: Any, args: tuple[Any, ...], path: str) -> None:
    errors: list[StrictTypeError] = []
    for option in args:
        try:
            _check(value, option, path)
            return
        except StrictTypeError as exc:
            errors.append(exc)
    # the alternative that got furthest explains best; a mismatched tag means the
    # alternative was never the intended one
    deepest = max(errors, key=lambda e: (not e.tag, len(e.path)))
    if len(errors) == 1 or "matches no alternative" in str(deepest):
        raise deepest
    raise StrictTypeError(
        deepest.path,
        f"matches no alternative; closest: {deepest}",
        tag=all(e.tag for e in errors),
    )


def _check_typeddict(value: Any, tp: Any, path: str) -> None:
    if not isinstance(value, dict):
        raise StrictTypeError(path, f"expected an object ({tp.__name__}), got {value!r}")
    hints = typing.get_type_hints(tp, include_extras=True)
    by_wire = {_alias(_strip(h)[1], k): (k, h) for k, h in hints.items()}
    for wire, (_, hint) in by_wire.items():  # literal tags first: they say which type was meant
        if wire in value and get_origin(_strip(hint)[0]) is Literal:
            try:
                _check(value[wire], hint, f"{path}.{wire}")
            except StrictTypeError as exc:
                raise StrictTypeError(exc.path, str(exc).split(": ", 1)[1], tag=True) from None
    for key in value:
        if key not in by_wire:
            raise StrictTypeError(
                f"{path}.{key}", f"key not declared by {tp.__name__} (declared: {sorted(by_wire)})"
            )
    for wire, (key, hint) in by_wire.items():
        if wire in value:
            _check(value[wire], hint, f"{path}.{wire}")
        elif _required(tp, key, hint):
            raise StrictTypeError(f"{path}.{wire}", f"required by {tp.__name__} but missing")


def _required(tp: Any, key: str, hint: Any) -> bool:
    """Whether a TypedDict key is required. ``__required_keys__`` misses ``Required[...]``
    written as a postponed (string) annotation, so the resolved hint is asked as well."""
    marks = set()
    while True:
        origin = get_origin(hint)
        name = getattr(origin, "_name", None) or getattr(origin, "__name__", None)
        if hasattr(hint, "__metadata__"):
            hint = hint.__origin__
        elif name in ("Required", "NotRequired", "ReadOnly"):
            marks.add(name)
            hint = get_args(hint)[0]
        else:
            break
    if "Required" in marks:
        return True
    if "NotRequired" in marks:
        return False
    return key in tp.__required_keys__


def _check_model(value: Any, tp: Any, path: str) -> None:
    if not isinstance(value, dict):
        raise StrictTypeError(path, f"expected an object ({tp.__name__}), got {value!r}")
    generator = (getattr(tp, "model_config", None) or {}).get("alias_generator")
    by_wire: dict[str, Any] = {}
    for name, info in tp.model_fields.items():
        by_wire[name] = info
        alias = info.alias or (generator(name) if callable(generator) else None)
        if alias:
            by_wire[alias] = info
    for key, item in value.items():
        if key not in by_wire:
            raise StrictTypeError(
                f"{path}.{key}", f"key not declared by {tp.__name__} (declared: {sorted(by_wire)})"
            )
        _check(item, by_wire[key].annotation, f"{path}.{key}")
    for name, info in tp.model_fields.items():
        alias = info.alias or (generator(name) if callable(generator) else name)
        if info.is_required() and name not in value and alias not in value:
            raise StrictTypeError(f"{path}.{alias}", f"required by {tp.__name__} but missing")


# -- contexts --------------------------------------------------------------------------------

LONG_SYSTEM = "You are the release assistant for the Lamina project. " * 400
TOOLS = (
    Tool(
        name="read_file",
        description="Read a file of the workspace.",
        input_schema={
            "type": "object",
            "properties": {"path": {"type": "string", "description": "Relative path."}},
            "required": ["path"],
        },
    ),
)


def make_context(
    *,
    model: str,
    provider: str,
    history: Sequence[Message] = (),
    current: str = "What changed since yesterday?",
    system: str = "You are a careful assistant.",
    tools: Sequence[Tool] = TOOLS,
    system_tokens: int | None = None,
    history_tokens: int | None = None,
    attachments: Sequence[Part] = (),
    max_tokens: int | None = None,
) -> AssembledContext:
    """An ``AssembledContext`` built by hand (no assembler), with a plausible budget."""
    sys_tokens = system_tokens if system_tokens is not None else len(system) // 4
    hist_tokens = (
        history_tokens
        if history_tokens is not None
        else sum(len(m.text) for m in history) // 4 + 4 * len(history)
    )
    event_tokens = len(current) // 4 + 4
    budget = TokenBudget.plan(model_limit=200_000, reserve_response=4096, reserve_tools=0)
    used_total = sys_tokens + hist_tokens + event_tokens
    used = BudgetUsage(
        system_prompt=sys_tokens, history=hist_tokens, event=event_tokens, total=used_total
    )
    budget = TokenBudget(
        model_limit=budget.model_limit,
        reserve_response=budget.reserve_response,
        reserve_tools=budget.reserve_tools,
        available=budget.available,
        used=used,
    )
    return AssembledContext(
        system_prompt=system,
        history=tuple(history),
        current_message=Message(role="user", content=(TextPart(text=current), *attachments)),
        tools=tuple(tools),
        model=model,
        provider=provider,
        model_config=ModelConfig(max_tokens=max_tokens),
        token_budget=budget,
        session_label="conformance-session",
        role="unified",
        workspace_path=".",
    )


PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="


def _call(call_id: str, name: str = "read_file") -> ToolCallPart:
    return ToolCallPart(id=call_id, name=name, arguments={"path": f"notes/{call_id}.md"})


def _result(call_id: str, content: str = "file contents", error: bool = False) -> ToolResultPart:
    return ToolResultPart(call_id=call_id, content=content, is_error=error)


#: Named conversations every adapter must turn into a valid request.
SCENARIOS: dict[str, tuple[Message, ...]] = {
    "empty": (),
    "simple": (
        Message.of("user", "Hello there."),
        Message.of("assistant", "Hi! How can I help?"),
    ),
    "same-role-runs": (
        Message.of("user", "First note."),
        Message.of("user", "Second note."),
        Message.of("assistant", "Noted."),
        Message.of("assistant", "Anything else?"),
    ),
    "assistant-first": (
        Message.of("assistant", "Earlier I said the build was green."),
        Message.of("user", "Is it still?"),
    ),
    "tool-round-trip": (
        Message.of("user", "Read the changelog."),
        Message(
            role="assistant",
            content=(TextPart(text="Reading it."), _call("call_1"), _call("call_2")),
        ),
        Message(role="tool", content=(_result("call_2", "second"),)),
        Message(role="tool", content=(_result("call_1", "first", error=True),)),
        Message.of("assistant", "Both read."),
    ),
    "orphans": (
        Message(role="tool", content=(_result("ghost", "result with no call"),)),
        Message(role="assistant", content=(_call("call_9"),)),
        Message.of("user", "Never mind that."),
        Message(role="assistant", content=(_call("call_3"),)),
    ),
    "blank-and-image": (
        Message.of("user", "   "),
        Message(
            role="user",
            content=(
                TextPart(text="See the diagram."),
                ImagePart(media_type="image/png", data=PNG),
            ),
        ),
        Message.of("assistant", ""),
        Message.of("assistant", "It shows the pipeline."),
    ),
    "history-ends-with-call": (
        Message.of("user", "Check the file."),
        Message(role="assistant", content=(TextPart(text="Checking."), _call("call_7"))),
    ),
}


def random_history(seed: int) -> tuple[Message, ...]:
    """A messy random conversation: roles, blank text, tool calls with missing, duplicate,
    reordered or stray results."""
    rng = random.Random(seed)
    out: list[Message] = []
    pending: list[str] = []
    for i in range(rng.randint(0, 12)):
        kind = rng.choice(["user", "assistant", "call", "result", "stray", "blank"])
        if kind == "call":
            ids = [f"c{seed}_{i}_{k}" for k in range(rng.randint(1, 3))]
            pending.extend(ids)
            out.append(Message(role="assistant", content=tuple(_call(c) for c in ids)))
        elif kind == "result" and pending:
            rng.shuffle(pending)
            out.append(Message(role="tool", content=(_result(pending.pop(), f"out {i}"),)))
        elif kind == "stray":
            out.append(Message(role="tool", content=(_result(f"stray{i}", "lost"),)))
        elif kind == "blank":
            out.append(Message.of(rng.choice(("user", "assistant")), " "))
        else:
            role: Literal["user", "assistant"] = "assistant" if kind == "assistant" else "user"
            out.append(Message.of(role, f"{role} message {i}"))
    return tuple(out)


# -- the suite -------------------------------------------------------------------------------


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

    def test_context_overflow(self) -> None:
        adapter = self.make_adapter()
        assert self.overflow_errors, "set `overflow_errors`"
        for error in self.overflow_errors:
            assert adapter.is_context_overflow(error), error
        for error in self.other_errors:
            assert not adapter.is_context_overflow(error), error


def payload_from_cli(
    config: str,
    message: str,
    *,
    plugins: str,
    provider: str | None = None,
    time: str = "2026-01-02T03:04:05Z",
) -> Any:
    """Run ``lamina assemble --format payload`` as a user would (a subprocess, only the given
    installed ``plugins`` loaded) and return the printed request; fails with its stderr."""
    import os
    import subprocess
    import sys

    args = [sys.executable, "-m", "lamina", "assemble", "--config", config, "--message", message]
    args += ["--time", time, "--format", "payload"]
    if provider is not None:
        args += ["--provider", provider]
    out = subprocess.run(
        args, capture_output=True, text=True, env={**os.environ, "LAMINA_PLUGINS": plugins}
    )
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


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

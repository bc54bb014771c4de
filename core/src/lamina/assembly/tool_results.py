"""Edit tool results (and calls) before anything else is cut: stub old ones, cap big ones.

Context editing (``[tool_results] stub_after``): a result in a turn older than the newest N
is replaced by a one-line stub naming the call and its size. Results are stubbed N turns at
a time, counted from the history's start, so the request's start changes once every N turns.

Caps: one huge result (a file read, a log, a search) in a protected recent turn would
otherwise make every later request over budget. A result over its cap enters the context as
its head and tail around a marker saying how much was left out; a call whose arguments are
over its cap (a whole file written through ``write_file``) has its longest strings cut the
same way (``lamina.assembly.call_caps``).

Whoever stores the session keeps the full result and call. Both edits are deterministic, so the same
history gives the same bytes every turn and the cache prefix survives.
"""

from __future__ import annotations

import json
from functools import partial
from typing import TYPE_CHECKING

from attrs import evolve

from lamina.assembly.call_caps import around, capped_arguments
from lamina.assembly.history import history_groups
from lamina.assembly.layout import merged_shape
from lamina.assembly.measure import Measurer, arguments_json
from lamina.assembly.state import InFlight, Item
from lamina.config import ToolResultsConfig
from lamina.model.blocks import content_hash
from lamina.model.messages import Part, ToolCallPart, ToolResultPart
from lamina.records import Tokenizer
from lamina.tokens import TokenCounter

if TYPE_CHECKING:
    from lamina.assembly.fit import Fitter

STRATEGY = "tool_result_cap"
CALL_STRATEGY = "tool_call_cap"
STUB = "tool_result_stub"
#: Tries at the cut; each corrects by what the re-count found over the cap.
_ROUNDS = 4
#: Characters of a call's arguments (as JSON) a stub shows.
_ARGUMENTS = 80


def edit_tool_results(
    state: InFlight, measurer: Measurer, fitter: Fitter, config: ToolResultsConfig
) -> None:
    """Stub old tool results, then cap the rest over their limit. Only the history items
    holding tool calls or results are looked at; capping only when one of them holds more
    than the smallest cap (a result cannot count more than its message). What was changed is
    put back when the call ends (the items are touched)."""
    if not state.tool_items:
        return
    stale = _old_results(state, config)
    floor = smallest_cap(config, state.budget.available)
    big = max(b.tools_peak() for b in state.buckets if b.tools) > floor  # (each found once)
    if not stale and not big:
        return
    fitter.resolve()  # the previous call's cut may hold some of them
    if stale:
        stub_tool_results(stale, _calls(state.tool_items), measurer, config)
    if big:
        cap_tool_results(evolve(state, items=state.tool_items), measurer, config)
    for item in state.tool_items:
        if not item.pristine:
            fitter.touch(item)


def smallest_cap(config: ToolResultsConfig, available: int) -> int:
    """The smallest cap any tool result has under ``available`` tokens: no message holding
    fewer tokens is edited."""
    default = config.max_tokens or max(1, int(config.share * available))
    return min([default, *config.per_tool.values()])


def stub_boundary(groups: int, keep: int) -> int:
    """How many of ``groups`` history groups (oldest first) have their tool results stubbed
    when ``keep`` (> 0) groups are kept whole: a multiple of ``keep``, so the boundary moves
    once every ``keep`` groups, leaving between ``keep`` and ``2 * keep - 1`` groups whole."""
    return keep * ((groups - keep) // keep) if groups >= 2 * keep else 0


def _old_results(state: InFlight, config: ToolResultsConfig) -> list[Item]:
    """The history items with tool results in groups older than the stub boundary."""
    keep = config.stub_after
    if keep <= 0:
        return []
    buckets = state.history_buckets
    if buckets is not None:
        groups, _sizes = merged_shape(buckets)
    else:
        groups = history_groups(state.by_placement.get("history", []))
    boundary = stub_boundary(len(groups), keep)
    if boundary == 0:
        return []
    return [
        item
        for group in groups[:boundary]
        for item in group
        if not item.synthetic and any(isinstance(p, ToolResultPart) for p in item.base.content)
    ]


def _calls(items: list[Item]) -> dict[str, ToolCallPart]:
    return {
        part.id: part
        for item in items
        for part in item.base.content
        if isinstance(part, ToolCallPart)
    }


def stub_tool_results(
    items: list[Item], calls: dict[str, ToolCallPart], measurer: Measurer, config: ToolResultsConfig
) -> None:
    """Replace each tool result of ``items`` over ``stub_over`` tokens by its stub, in place."""
    for item in items:
        parts = item.base.content
        changed: list[Part] = list(parts)
        notes = []
        for n, part in enumerate(parts):
            if not isinstance(part, ToolResultPart):
                continue
            tokens = measurer.counter.count(part.content)
            if tokens <= config.stub_over:
                continue
            call = calls.get(part.call_id)
            tool = call.name if call is not None else "tool"
            changed[n] = evolve(part, content=stub_text(config, tool, part.call_id, tokens, call))
            notes.append(
                f"{tool} result of call {part.call_id} ({tokens} tokens) stubbed: older than "
                f"the newest {config.stub_after} turns"
            )
        if notes:
            _replace(item, tuple(changed), measurer, "; ".join(notes), STUB)


def stub_text(
    config: ToolResultsConfig, tool: str, call_id: str, tokens: int, call: ToolCallPart | None
) -> str:
    """The one line a stubbed result becomes (the same for the same call and result)."""
    arguments = ""
    if call is not None:
        arguments = json.dumps(call.arguments, sort_keys=True, ensure_ascii=False, default=str)
        if len(arguments) > _ARGUMENTS:
            arguments = arguments[: _ARGUMENTS - 1] + "…"
    return config.stub.format(tool=tool, call_id=call_id, tokens=tokens, arguments=arguments)


def cap_tool_results(state: InFlight, measurer: Measurer, config: ToolResultsConfig) -> None:
    """Cut every history tool result over its cap to head + marker + tail, and every tool
    call whose arguments are over it (``lamina.assembly.call_caps``), in place."""
    tokenizer = measurer.counter
    names = {
        part.id: part.name
        for item in state.items
        if item.placement == "history"
        for part in item.block.content
        if isinstance(part, ToolCallPart)
    }
    default = config.max_tokens or max(1, int(config.share * state.budget.available))
    for item in state.items:
        if item.placement != "history":
            continue
        parts = item.block.content
        if not any(isinstance(p, (ToolResultPart, ToolCallPart)) for p in parts):
            continue
        changed: list[Part] = list(parts)
        notes = []
        strategy = STRATEGY
        for n, part in enumerate(parts):
            if isinstance(part, ToolCallPart):
                found = _capped_call(part, item.block.hash, n, default, tokenizer, config)
                if found is not None:
                    changed[n], note = found
                    notes.append(note)
                    strategy = CALL_STRATEGY
                continue
            if not isinstance(part, ToolResultPart):
                continue
            tool = names.get(part.call_id, "tool")
            cap = config.per_tool.get(tool, default)
            # Memoized under the block's hash: a big result is not digested again each request.
            total = tokenizer.remember(
                f"result:{n}:{item.block.hash}", partial(tokenizer.count, part.content)
            )
            if total <= cap:
                continue
            text = _head_and_tail(part.content, cap, total, tool, part.call_id, tokenizer, config)
            changed[n] = evolve(part, content=text)
            notes.append(f"{tool} result over its cap of {cap} tokens ({total} in all)")
        if notes:
            _replace(item, tuple(changed), measurer, "; ".join(notes), strategy)


def _capped_call(
    part: ToolCallPart,
    block_hash: str,
    n: int,
    default: int,
    tokenizer: TokenCounter,
    config: ToolResultsConfig,
) -> tuple[ToolCallPart, str] | None:
    """The call cut to its tool's cap (its name and its arguments' JSON, as it is charged),
    and why; ``None`` when it fits."""
    cap = config.per_tool.get(part.name, default)
    name = tokenizer.count(part.name)
    total = name + tokenizer.remember(
        f"call:{n}:{block_hash}", lambda: tokenizer.count(arguments_json(part.arguments))
    )
    if total <= cap:
        return None
    marker = config.call_marker.format(
        omitted=total - cap, total=total, tool=part.name, call_id=part.id
    )
    room = max(1, cap - name)
    arguments = capped_arguments(part.arguments, room, total - name, marker, tokenizer)
    why = f"{part.name} call over its cap of {cap} tokens ({total} in all)"
    return evolve(part, arguments=arguments), why


def _head_and_tail(
    text: str,
    cap: int,
    total: int,
    tool: str,
    call_id: str,
    tokenizer: Tokenizer,
    config: ToolResultsConfig,
) -> str:
    bounds = tokenizer.boundaries(text)
    keep = cap
    best = ""
    for _ in range(_ROUNDS):
        marker = config.marker.format(
            omitted=total - max(0, keep), total=total, tool=tool, call_id=call_id
        )
        best = around(text, bounds, max(0, keep - tokenizer.count(marker)), marker)
        over = tokenizer.count(best) - cap
        if over <= 0:
            return best
        keep -= over
    return best


def _replace(
    item: Item, parts: tuple[Part, ...], measurer: Measurer, reason: str, strategy: str = STRATEGY
) -> None:
    block = item.block
    item.block = evolve(block, content=parts, hash=content_hash(parts), token_count=None)
    item.tokens = measurer.measure(item)
    item.status = "truncated"
    item.strategy = strategy
    item.reason = reason

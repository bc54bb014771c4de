"""Cap single tool results before anything else is cut.

One huge result (a file read, a log, a search) in a protected recent turn would otherwise
make every later request over budget. A result over its cap enters the context as its head
and tail around a marker saying how much was left out; whoever stores the session keeps the
full result. The cut is deterministic, so the same result gives the same bytes every turn
and the cache prefix survives.
"""

from __future__ import annotations

from attrs import evolve

from lamina.assembly.measure import Measurer
from lamina.assembly.state import InFlight, Item
from lamina.config import ToolResultsConfig
from lamina.model.blocks import content_hash
from lamina.model.messages import Part, ToolCallPart, ToolResultPart
from lamina.records import Tokenizer

STRATEGY = "tool_result_cap"
#: Tries at the cut; each corrects by what the re-count found over the cap.
_ROUNDS = 4


def cap_tool_results(state: InFlight, measurer: Measurer, config: ToolResultsConfig) -> None:
    """Cut every history tool result over its cap to head + marker + tail, in place."""
    tokenizer = measurer.counter.tokenizer
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
        if not any(isinstance(p, ToolResultPart) for p in parts):
            continue
        changed: list[Part] = list(parts)
        notes = []
        for n, part in enumerate(parts):
            if not isinstance(part, ToolResultPart):
                continue
            tool = names.get(part.call_id, "tool")
            cap = config.per_tool.get(tool, default)
            total = measurer.counter.count(part.content)
            if total <= cap:
                continue
            text = _head_and_tail(part.content, cap, total, tool, part.call_id, tokenizer, config)
            changed[n] = evolve(part, content=text)
            notes.append(f"{tool} result over its cap of {cap} tokens ({total} in all)")
        if notes:
            _replace(item, tuple(changed), measurer, "; ".join(notes))


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
        room = max(0, keep - tokenizer.count(marker))
        head_tokens = (room + 1) // 2
        tail_tokens = room - head_tokens
        head = text[: bounds[head_tokens]] if head_tokens < len(bounds) else text
        tail = text[bounds[len(bounds) - tail_tokens] :] if tail_tokens else ""
        best = head + marker + tail
        over = tokenizer.count(best) - cap
        if over <= 0:
            return best
        keep -= over
    return best


def _replace(item: Item, parts: tuple[Part, ...], measurer: Measurer, reason: str) -> None:
    block = item.block
    item.block = evolve(block, content=parts, hash=content_hash(parts), token_count=None)
    item.tokens = measurer.measure(item)
    item.status = "truncated"
    item.strategy = STRATEGY
    item.reason = reason

"""Measure: what each block costs in tokens, by the kernel's one set of rules.

``count_parts`` is public: plugins that size messages ahead of assembly (compaction, say) use
it rather than copying the rules.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from lamina.assembly.state import InFlight, Item
from lamina.errors import LaminaError, PluginError
from lamina.model.blocks import Block, Provenance
from lamina.model.messages import ImagePart, Part, TextPart, ToolCallPart, ToolResultPart
from lamina.records import Formatter

if TYPE_CHECKING:
    from lamina.assembly.rules import Rules
    from lamina.tokens import TokenCounter

#: Tokens charged for an image part: providers bill by size; this is a conservative flat rate.
IMAGE_TOKENS = 1024
#: Renderings an assembler keeps (blocks outside history: the system prompt's stay, each
#: request's event adds its own); past this many it starts afresh.
RENDERS = 4096


def arguments_json(arguments: dict[str, Any]) -> str:
    """A call's arguments as the kernel charges them: canonical JSON (keys sorted)."""
    return json.dumps(arguments, sort_keys=True, ensure_ascii=False)


def count_parts(parts: Sequence[Part], count: Callable[[str], int]) -> int:
    """The tokens of a message's parts as the kernel charges them: text and tool results by
    their text, a tool call by its name and its arguments' canonical JSON, an image at
    ``IMAGE_TOKENS``. ``count`` counts one string (a tokenizer's ``count``)."""
    total = 0
    for part in parts:
        if isinstance(part, TextPart):
            total += count(part.text)
        elif isinstance(part, ToolResultPart):
            total += count(part.content)
        elif isinstance(part, ToolCallPart):
            total += count(part.name) + count(arguments_json(part.arguments))
        else:
            total += IMAGE_TOKENS
    return total


def count_ids(parts: Sequence[Part], count: Callable[[str], int]) -> int:
    """The tokens of the tool call and result ids in a message: charged with its framing,
    because providers send them in the message's envelope (OpenAI's ``tool_call_id`` and
    ``tool_calls[].id``, Anthropic's ``tool_use_id``) and may count them."""
    total = 0
    for part in parts:
        if isinstance(part, ToolCallPart):
            total += count(part.id)
        elif isinstance(part, ToolResultPart):
            total += count(part.call_id)
    return total


class Measurer:
    """Renders and counts items by the kernel's rules, memoizing both: a block's rendering by
    its content and presentation, its count by content hash in the model's counter."""

    def __init__(
        self,
        rules: Rules,
        counter: TokenCounter,
        render_cache: dict[tuple[Any, ...], str],
        message_overhead: int = 0,
        gaps: dict[int, Block] | None = None,
    ) -> None:
        self.rules = rules
        self.counter = counter
        self.message_overhead = message_overhead
        self._render_cache = render_cache
        self._gaps = {} if gaps is None else gaps

    def formatter(self, item: Item) -> Formatter:
        return self.rules.formatter(item.spec, item.placement)

    def render(self, item: Item) -> str:
        """The block as its formatter renders it (memoized)."""
        block = item.block
        fmt = self.formatter(item)
        key = (
            fmt.name,
            block.hash,
            block.title,
            block.tag,
            block.provenance.path,
            block.trusted,
            block.id,
        )
        cache = self._render_cache
        text = cache.get(key)
        if text is None:
            if len(cache) >= RENDERS:  # (each request's event renders anew: bounded)
                cache.clear()
            text = cache.setdefault(key, self._checked_render(fmt, block))
        return text

    def pieces(self, items: list[Item]) -> list[str]:
        """The renderings of the items that have a body, in order."""
        return [self.render(i) for i in items if i.block.body]

    def joined(self, items: list[Item], *, keep: bool = True) -> str:
        """``items`` as rendered, joined by the first one's separator. Kept with the
        renderings unless ``keep`` is false (the event, new each request): while they render
        the same, this is the same string, whose count the counter finds without digesting
        it again (``TokenCounter.count_recurring``)."""
        if not items:
            return ""
        separator = self.formatter(items[0]).separator
        if not keep:
            return separator.join(self.pieces(items))
        key = ("joined", separator, *self.pieces(items))
        cache = self._render_cache
        text = cache.get(key)
        if text is None:
            if len(cache) >= RENDERS:
                cache.clear()
            text = cache.setdefault(key, separator.join(key[2:]))
        return text

    def _checked_render(self, fmt: Formatter, block: Block) -> str:
        """A formatter's output, or a ``PluginError`` naming its plugin if it raises or
        returns something other than text."""
        plugin = self.rules.registry.formatters[fmt.name].plugin
        try:
            text = fmt.render(block)
        except LaminaError:
            raise
        except Exception as exc:
            raise PluginError(
                f"formatter {fmt.name!r} raised {type(exc).__name__} on block {block.id!r}: {exc}",
                plugin=plugin,
            ) from exc
        if not isinstance(text, str):
            raise PluginError(
                f"formatter {fmt.name!r} returned {type(text).__name__} for block "
                f"{block.id!r}, expected str",
                plugin=plugin,
            )
        return text

    def parts(self, parts: Sequence[Part]) -> int:
        return count_parts(parts, self.counter.count)

    def framing(self, parts: Sequence[Part], overhead: int) -> int:
        """A message's framing: the model's per-message overhead and its tool ids."""
        return overhead + count_ids(parts, self.counter.count)

    def measure(self, item: Item) -> int:
        """An item's tokens: history by its parts, anything else as rendered plus its
        separator; a provider's own count when the same tokenizer made it."""
        block = item.block
        if block.token_count is not None and block.counted_by == self.counter.tokenizer.name:
            return block.token_count
        if item.placement == "history":
            return self.counter.remember(
                "parts:" + block.hash, lambda: count_parts(block.content, self.counter.count)
            )
        text_tokens = self.counter.count(self.render(item)) if block.body else 0
        images = sum(IMAGE_TOKENS for p in block.content if isinstance(p, ImagePart))
        # (a formatter's separator is the same string every time: counted without a digest)
        return text_tokens + images + self.counter.count_recurring(self.formatter(item).separator)

    def marker(self, count: int) -> Item:
        """The required history item that marks ``count`` cut blocks, measured (its block
        made once per count and assembler)."""
        block = self._gaps.get(count)
        if block is None:
            if len(self._gaps) >= 4096:
                self._gaps.clear()
            block = self._gaps[count] = Block.text(
                f"history:gap:{count}",
                "session",
                self.rules.marker_text(count),
                role="user",
                trusted=True,
                provenance=Provenance(plugin="core"),
            )
        item = Item(
            block=block,
            spec=self.rules.registry.layer("session"),
            placement="history",
            required=True,
            index=0,
            plugin="core",
            synthetic=True,
            reason="marks removed history",
        )
        item.tokens = item.original_tokens = self.parts(block.content)
        item.framing = item.charge = self.message_overhead
        return item


def measure(state: InFlight, measurer: Measurer) -> None:
    """The measure phase: every new item's tokens (a history message's framing with it, its
    tool ids included, so only kept messages are charged for it; reused items keep theirs),
    and the fixed overhead of the rest of the request."""
    info = state.model.info
    for item in state.fresh:
        measure_item(item, measurer, info.message_overhead)
    framing = 3  # the system message, the before/after-history messages, the current message
    state.fixed = info.message_overhead * framing + info.reply_overhead + state.tool_tokens


def measure_item(item: Item, measurer: Measurer, overhead: int) -> None:
    """A new item's tokens, and a history message's framing (``overhead`` and its tool ids)."""
    item.tokens = item.original_tokens = measurer.measure(item)
    if item.placement == "history":
        item.framing = item.charge = measurer.framing(item.block.content, overhead)

"""Blocks: the unit a layer provider yields and the pipeline measures, cuts and formats."""

from __future__ import annotations

from typing import Any, Literal

from attrs import Attribute, evolve, field, frozen

from lamina.digests import SHORT, sha256
from lamina.model.fields import cleaned_or_none, non_negative, non_negative_or_none
from lamina.model.messages import MessageRole, Part, TextPart, ToolResultPart, part_text

#: Where a block lands in the request. ``system``, ``history`` and ``event`` are the three
#: physical layers of the Broker design; ``before_history`` / ``after_history`` are the
#: Cortex draft's injection points at either end of the history.
Placement = Literal["system", "before_history", "history", "after_history", "event"]
PLACEMENTS: tuple[Placement, ...] = (
    "system",
    "before_history",
    "history",
    "after_history",
    "event",
)

#: The standard conceptual layers (the Broker design's). Plugins may declare more.
WORKSPACE, PERSONA, SESSION, MEMORY, EVENT = "workspace", "persona", "session", "memory", "event"


_UTF8, _PASS = "utf-8", "surrogatepass"


def content_hash(parts: tuple[Part, ...]) -> str:
    """A stable sha256 over a block's parts (type tag and fields, in order)."""
    first = parts[0] if len(parts) == 1 else None  # one text part: its size is known
    h = sha256(b"", len(first.text) if type(first) is TextPart else SHORT)
    for p in parts:
        if type(p) is TextPart:  # the same bytes as below, without attrs' generated repr
            h.update(b"TextPart\x00TextPart(text=")  # (three updates: no bytes formatting)
            h.update(repr(p.text).encode(_UTF8, _PASS))
            h.update(b")\x01")
            continue
        h.update(type(p).__name__.encode())
        h.update(b"\x00")
        h.update(repr(p).encode("utf-8", "surrogatepass"))
        h.update(b"\x01")
    digest: str = h.hexdigest()
    return digest


@frozen(kw_only=True)
class Provenance:
    """Where a block came from: the plugin, the source's own id, a file path and extra metadata."""

    plugin: str = ""
    source_id: str | None = None
    path: str | None = None
    metadata: dict[str, Any] = field(factory=dict)


def _unit_interval(_inst: object, attr: Attribute[float], value: float) -> None:
    if not 0.0 <= value <= 1.0:
        raise ValueError(f"{attr.name} must be within 0.0..1.0, got {value!r}")


@frozen(kw_only=True)
class Block:
    """A piece of context with everything the pipeline needs to place, fit and format it.

    ``required`` blocks are never cut (``None`` takes the layer's default); ``group`` ties
    blocks that must be kept or dropped together (a turn: a tool call and its result);
    ``trusted`` content is operator-authored and may carry markup, anything else is data and
    is escaped by the formatters. ``pre_truncated`` says why the provider already cut the
    content (a file read only partly); the report then shows the block as truncated.
    ``token_count`` is a count the provider already has; the kernel trusts it only when
    ``counted_by`` names the tokenizer the assembly uses, and counts again otherwise.
    """

    id: str
    layer: str
    content: tuple[Part, ...]
    role: MessageRole | None = None
    priority: float = field(default=0.5, validator=_unit_interval)
    truncation: str = "end"
    min_tokens: int = field(default=0, validator=non_negative)
    max_tokens: int | None = field(default=None, validator=non_negative_or_none)
    required: bool | None = None
    summarizable: bool = False
    group: str | None = None
    title: str | None = field(default=None, converter=cleaned_or_none)
    tag: str | None = field(default=None, converter=cleaned_or_none)
    trusted: bool = False
    token_count: int | None = field(default=None, validator=non_negative_or_none)
    counted_by: str | None = None
    pre_truncated: str | None = None
    provenance: Provenance = field(factory=Provenance)
    hash: str = field()

    @hash.default
    def _hash(self) -> str:
        return content_hash(self.content)

    @classmethod
    def text(cls, id: str, layer: str, text: str, **kwargs: Any) -> Block:
        """A block holding one text part."""
        return cls(id=id, layer=layer, content=(TextPart(text=text),), **kwargs)

    @property
    def body(self) -> str:
        """The text of every text-bearing part, joined by blank lines."""
        content = self.content
        if len(content) == 1 and type(content[0]) is TextPart:  # most blocks: no join to make
            return content[0].text
        return "\n\n".join(t for t in (part_text(p) for p in content) if t is not None)

    def text_part_index(self) -> int | None:
        """Index of the one part truncation may shorten, or ``None`` when there is not exactly one."""
        found = [i for i, p in enumerate(self.content) if part_text(p) is not None]
        return found[0] if len(found) == 1 else None

    def with_text(self, text: str) -> Block:
        """This block with its one text-bearing part replaced (hash recomputed, counts dropped)."""
        i = self.text_part_index()
        if i is None:
            raise ValueError(f"block {self.id!r} has no single text part to replace")
        old = self.content[i]
        new: Part = (
            TextPart(text=text)
            if isinstance(old, TextPart)
            else ToolResultPart(call_id=old.call_id, content=text, is_error=old.is_error)  # type: ignore[union-attr]
        )
        parts = (*self.content[:i], new, *self.content[i + 1 :])
        return evolve(self, content=parts, hash=content_hash(parts), token_count=None)

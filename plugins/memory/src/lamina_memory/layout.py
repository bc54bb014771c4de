"""The memory layer as the kernel will render it: one block per section, sized with the layer's
own formatter (``ProviderContext.layer``) and the assembly's tokenizer, so what is chosen fits
the budget as rendered, titles, fences and separators included. ``Layouts`` remembers a
service's formatters and token counts across requests."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from lamina import MEMORY, Block, Formatter, Provenance, Tokenizer
from lamina_memory.formats import summarize
from lamina_memory.query import SECTION_ORDER, SECTIONS
from lamina_memory.records import Candidate
from lamina_memory.selection import Selection

#: Overflow items offered for compression, at most.
MAX_COMPRESSED = 64
#: Token counts kept per tokenizer (then forgotten, all at once).
COUNTS_KEPT = 200_000


def by_section(chosen: Iterable[Candidate]) -> list[tuple[str, list[Candidate]]]:
    """Candidates grouped by section, sections in injection order, items best first."""
    groups: dict[str, list[Candidate]] = {}
    for c in chosen:
        groups.setdefault(c.section, []).append(c)
    order = {name: i for i, name in enumerate(SECTION_ORDER)}
    return [
        (title, sorted(items, key=lambda c: (-c.score, c.key)))
        for title, items in sorted(groups.items(), key=lambda kv: order.get(kv[0], 99))
    ]


def section_block(plugin: str, section: str, items: Sequence[Candidate]) -> Block:
    """One section's block: its items best first, one per line, each item's provenance
    (source id, scores, tokens) in ``provenance.metadata["items"]``."""
    slug = section.lower().replace(" ", "_")
    return Block.text(
        f"memory.{slug}",
        MEMORY,
        "\n".join(c.text for c in items),
        title=section,
        tag="memory",
        priority=max(0.0, min(1.0, max((c.score for c in items), default=0.0))),
        truncation="end",
        trusted=False,
        provenance=Provenance(
            plugin=plugin,
            source_id=slug,
            metadata={
                "section": section,
                "items": [
                    {
                        "id": c.key,
                        "source_id": c.source_id,
                        "kind": c.kind,
                        "source": c.source,
                        "score": round(c.score, 6),
                        "relevance": round(c.relevance, 6),
                        "recency": round(c.recency, 6),
                        "salience": round(c.salience, 6),
                        "tokens": c.tokens,
                    }
                    for c in items
                ],
            },
        ),
    )


class Layout:
    """Sizes and builds the memory layer's blocks with one formatter. ``count`` counts the
    texts that repeat (items, titles: it may remember them), ``recount`` the rendered layer,
    which is new each time."""

    def __init__(
        self,
        formatter: Formatter,
        count: Callable[[str], int],
        *,
        plugin: str,
        recount: Callable[[str], int] | None = None,
    ) -> None:
        self.formatter = formatter
        self.count = count
        self.recount = recount or count
        self.plugin = plugin
        self._frames: dict[str, int] = {}

    def render(self, blocks: Sequence[Block]) -> str:
        """The blocks as the formatter renders them, joined by its separator."""
        return self.formatter.separator.join(self.formatter.render(b) for b in blocks)

    def frame_cost(self, section: str) -> int:
        """What a section costs beyond its items: its title and fence as the formatter makes
        them, and the separator before the next block."""
        cost = self._frames.get(section)
        if cost is None:
            item = Candidate(key="probe", source="probe", section=section, text="x", relevance=0)
            framed = self.formatter.render(section_block(self.plugin, section, [item]))
            cost = self.count(framed) - self.count("x") + self.count(self.formatter.separator)
            self._frames[section] = cost = max(0, cost)
        return cost

    def cost(self, c: Candidate, first: bool) -> int:
        """One item's tokens: its line, its line break and, for a section's first item, the
        section's frame."""
        return self.count(c.text) + self.count("\n") + (self.frame_cost(c.section) if first else 0)

    def blocks(self, chosen: Iterable[Candidate]) -> list[Block]:
        return [section_block(self.plugin, s, items) for s, items in by_section(chosen)]

    def tokens(self, blocks: Sequence[Block]) -> int:
        """Tokens of the memory layer as rendered, with the separator that follows it."""
        if not blocks:
            return 0
        return self.recount(self.render(blocks)) + self.count(self.formatter.separator)

    def fit(
        self,
        selection: Selection,
        *,
        compress: bool,
        compress_min: int,
        compressor: Callable[[str, int], str] | None = None,
    ) -> list[Block]:
        """The section blocks of what was chosen, re-counted as rendered (BPE merges across
        lines can make the whole larger than its items) and trimmed from the worst item until
        they fit; then, if asked and room is left, the overflow in a summarizable block."""
        chosen = list(selection.chosen)
        out = self.blocks(chosen)
        while chosen and self.tokens(out) > selection.budget:
            chosen.remove(min(chosen, key=lambda c: (c.score, c.key)))
            out = self.blocks(chosen)
        left = selection.budget - self.tokens(out)
        if compress and selection.overflow and left >= compress_min:
            extra = self._additional(selection.overflow, chosen, left, compressor)
            if extra is not None:
                out.append(extra)
        return out

    def _additional(
        self,
        overflow: Sequence[Candidate],
        chosen: Sequence[Candidate],
        left: int,
        compressor: Callable[[str, int], str] | None,
    ) -> Block | None:
        """What did not fit (the lowest-scoring items, each cut to its first sentence) for the
        kernel's summarizer (an LLM one when ``[fit] summarizer`` names one; else it is cut at
        the end); ``compressor`` fits it to what is left first. None rather than an empty
        block when nothing of it would remain."""
        items = overflow[:MAX_COMPRESSED]
        first = SECTIONS["additional"] not in {c.section for c in chosen}
        text = "\n".join(summarize(c.text) for c in items)
        if compressor is not None:
            frame = self.frame_cost(SECTIONS["additional"]) if first else self.count("\n")
            text = compressor(text, max(0, left - 8 - frame))
        if not text.strip():
            return None
        return Block.text(
            "memory.additional",
            MEMORY,
            text,
            title=SECTIONS["additional"] if first else None,
            tag="memory",
            priority=0.0,
            truncation="end",
            summarizable=True,
            max_tokens=max(0, left - 8),
            trusted=False,
            provenance=Provenance(
                plugin=self.plugin,
                source_id="additional",
                metadata={
                    "compressed": [c.key for c in items],
                    "section": SECTIONS["additional"],
                },
            ),
        )


def _estimate(block: Block) -> str:
    """For callers of ``retrieve`` outside an assembly, who name a formatter the service has
    not seen yet: the title on its own line, then the body (an estimate of the frame)."""
    return f"{block.title}\n{block.body}" if block.title else block.body


class Layouts:
    """One service's layouts: the formatters the kernel has rendered the memory layer with, by
    name, and token counts of item texts per tokenizer, kept across requests (texts repeat)."""

    def __init__(self) -> None:
        self._formatters: dict[str, Formatter] = {}
        self._counts: dict[str, dict[str, int]] = {}

    def get(self, fmt: Formatter | str, tokenizer: Tokenizer, *, plugin: str) -> Layout:
        """Sizing with ``fmt`` (a formatter, or the name of one seen before) and
        ``tokenizer``, token counts of texts remembered across requests."""
        if isinstance(fmt, str):
            fmt = self._formatters.get(fmt) or Formatter(name=fmt, render=_estimate)
        else:
            self._formatters.setdefault(fmt.name, fmt)
        counts = self._counts.setdefault(tokenizer.name, {})
        if len(counts) > COUNTS_KEPT:
            counts.clear()

        def count(text: str) -> int:
            n = counts.get(text)
            if n is None:
                n = counts[text] = tokenizer.count(text)
            return n

        return Layout(fmt, count, plugin=plugin, recount=tokenizer.count)

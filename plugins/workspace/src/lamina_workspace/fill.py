"""The working-set protocol's assembly algorithm over the blocks of a working set: files by
priority, each included whole while the manifest's ``effective`` budget lasts, the first one
that does not fit truncated to what is left (unless ``never``), the rest excluded. The
whole context is fitted afterwards by the kernel, within its own budget.

Also what the report needs to be faithful to files cut before the kernel saw them: the
tokens they had before the cut and the rule that cut them.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from attrs import evolve

from lamina import AssembledContext, Block, BlockReport, ProviderContext, TextPart
from lamina_workspace.beneath import printable
from lamina_workspace.working_set import Partial, WorkingSet

#: Provenance metadata of a block cut while it was read: ``{"by": rule, "tokens": before}``.
CUT_KEY = "cut_before_fit"


def cost(ctx: ProviderContext, block: Block) -> int:
    """What ``block`` costs as the kernel measures it: rendered by its layer's formatter, plus
    the separator that follows it."""
    fmt = ctx.layer(block.layer).formatter
    count = ctx.tokenizer.count
    return count(fmt.render(block)) + count(fmt.separator)


def _with_cut(ctx: ProviderContext, block: Block, part: Partial) -> Block:
    """``block`` with the tokens its file had before the read cut it (an estimate scaled by
    size when part of the file was never read) and the rule that cut it."""
    uncut = part.uncut[:-1] if part.uncut.endswith("\n") else part.uncut
    before = cost(ctx, evolve(block, content=(TextPart(text=uncut),)))
    cut: dict[str, Any] = {"by": part.by, "tokens": max(before, round(before * part.scale))}
    if part.scale > 1.0:
        cut["estimated"] = True
    metadata = {**block.provenance.metadata, CUT_KEY: cut}
    return evolve(block, provenance=evolve(block.provenance, metadata=metadata))


def fill(ctx: ProviderContext, ws: WorkingSet) -> Iterator[Block]:
    """The working set's blocks within its ``effective`` budget (all of them without one);
    files left out are reported as excluded with the reason, as the protocol's report does."""
    partial = {p.entry.path: p for p in ws.partial}
    budget = ws.manifest.budget
    effective = budget.effective if budget is not None else None
    used = 0
    for block in ws.blocks:
        path = block.provenance.path or ""
        if path in partial:
            block = _with_cut(ctx, block, partial[path])
        if effective is None:
            yield block
            continue
        tokens = cost(ctx, block)
        left = effective - used
        if tokens <= left:
            used += tokens
            yield block
        elif block.truncation != "never" and left > 0:
            used = effective  # the kernel cuts it to what is left, by its truncate strategy
            yield evolve(block, max_tokens=left)
        else:
            ctx.exclude(
                id=block.id,
                layer=block.layer,
                reason=f"over the working set's effective budget ({effective} tokens, "
                f"{max(left, 0)} left for {tokens}); priority {block.priority:g} too low",
                path=printable(path),
            )


def _faithful(block: BlockReport) -> BlockReport:
    cut: Mapping[str, Any] | None = block.details.get(CUT_KEY)
    if not isinstance(cut, Mapping) or block.status == "dropped":
        return block
    by = str(cut["by"])
    return evolve(
        block,
        original_tokens=max(block.original_tokens, int(cut["tokens"])),
        strategy=by if block.strategy in (None, by) else f"{by}+{block.strategy}",
    )


def faithful_report(ctx: AssembledContext) -> AssembledContext:
    """``ctx`` with each file cut while it was read reported with its tokens before the cut
    and the rule that cut it (``max_lines``; ``max_lines+middle`` when the kernel cut it too),
    and its layer's totals to match."""
    report = ctx.report
    blocks = tuple(_faithful(b) for b in report.blocks)
    if blocks == report.blocks:
        return ctx
    extra: dict[str, int] = {}
    for old, new in zip(report.blocks, blocks, strict=True):
        extra[new.layer] = extra.get(new.layer, 0) + new.original_tokens - old.original_tokens
    layers = tuple(
        evolve(lr, original_tokens=lr.original_tokens + extra.get(lr.layer, 0))
        for lr in report.layers
    )
    return evolve(ctx, report=evolve(report, blocks=blocks, layers=layers))

"""History the host supplies with the request (``AssemblyRequest.history``), as session blocks
that obey the same rules as stored history: grouped into turns (a turn starts at each user
message), so a tool call is always kept or cut with its result.

A system message in the list becomes a trusted workspace block (it belongs to the system
prompt); a tool result whose call is not in the list, or a call with no result, is left out
with a warning, since providers refuse both.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from lamina.hookspecs import hookimpl
from lamina.model.blocks import SESSION, WORKSPACE, Block, Provenance
from lamina.model.messages import Part, ToolCallPart, ToolResultPart
from lamina.records import LayerProvider, ProviderContext

#: The plugin name, and the report's ``history_source`` for request history.
NAME = "history"


def provide(ctx: ProviderContext) -> Iterator[Block]:
    history = ctx.request.history
    if not history:
        return
    answered = {p.call_id for m in history for p in m.content if isinstance(p, ToolResultPart)}
    called: set[str] = set()
    turn = -1
    for i, message in enumerate(history):
        if message.role == "system":
            yield Block(
                id=f"history:{i}",
                layer=WORKSPACE,
                content=message.content,
                trusted=True,
                provenance=Provenance(plugin=ctx.plugin, source_id=str(i)),
            )
            continue
        parts = _paired(message.content, answered, called, i, ctx)
        if not parts:
            continue
        opens_turn = message.role == "user" and not any(
            isinstance(p, ToolResultPart) for p in parts
        )
        if opens_turn or turn < 0:
            turn += 1
        metadata = {"context_json": message.context_json} if message.context_json else {}
        yield Block(
            id=f"history:{i}",
            layer=SESSION,
            role=message.role,
            content=parts,
            group=f"history:turn:{turn}",
            provenance=Provenance(plugin=ctx.plugin, source_id=str(i), metadata=metadata),
        )


def _paired(
    parts: Sequence[Part], answered: set[str], called: set[str], index: int, ctx: ProviderContext
) -> tuple[Part, ...]:
    """The message's parts less tool calls with no result and results with no earlier call."""
    kept: list[Part] = []
    for part in parts:
        if isinstance(part, ToolCallPart):
            if part.id not in answered:
                ctx.warn(f"history[{index}]: tool call {part.id!r} has no result; left out")
                continue
            called.add(part.id)
        elif isinstance(part, ToolResultPart) and part.call_id not in called:
            ctx.warn(f"history[{index}]: tool result for {part.call_id!r} has no call; left out")
            continue
        kept.append(part)
    return tuple(kept)


@hookimpl
def lamina_layer_providers() -> list[LayerProvider]:
    return [
        LayerProvider(
            name=NAME,
            provide=provide,
            layers=(SESSION, WORKSPACE),
            description="the history a host passes with the request",
            inline=True,
        )
    ]

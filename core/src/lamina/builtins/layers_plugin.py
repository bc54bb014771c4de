"""The five conceptual layers of the Broker design and their default placement and cut order.

Compression priority (the Broker design): memory is cut first, then session history; workspace,
persona and the current event are required and never cut.
"""

from __future__ import annotations

from lamina.hookspecs import hookimpl
from lamina.model.blocks import EVENT, MEMORY, PERSONA, SESSION, WORKSPACE
from lamina.records import LayerSpec

STANDARD_LAYERS = (
    LayerSpec(
        name=WORKSPACE,
        placement="system",
        order=10,
        cut_rank=2,
        required=True,
        description="AGENTS.md, rules, static runtime info",
    ),
    LayerSpec(
        name=PERSONA,
        placement="system",
        order=20,
        cut_rank=3,
        required=True,
        description="SOUL.md, IDENTITY.md, permissions",
    ),
    LayerSpec(
        name=SESSION,
        placement="history",
        order=30,
        cut_rank=1,
        description="conversation history from the ledger",
    ),
    LayerSpec(
        name=MEMORY,
        placement="event",
        order=40,
        cut_rank=0,
        format="markdown",
        description="injected memories and skill context",
    ),
    LayerSpec(
        name=EVENT,
        placement="event",
        order=50,
        cut_rank=4,
        required=True,
        description="current time, channel, hook injections, the message",
    ),
)


@hookimpl
def lamina_layers() -> tuple[LayerSpec, ...]:
    return STANDARD_LAYERS

"""Dialogue mode (the Loom design) as kernel blocks: the combined system context (agent → tree →
instruction sources) as required system blocks, the active path as ``session`` history (human →
user, model → assistant, consecutive same-author nodes merged), and the loom-aware blocks."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Literal

from attrs import field, frozen

from lamina import Block, LayerSpec, Part, Provenance
from lamina_loom.errors import LoomError
from lamina_loom.model import Node, Tree
from lamina_loom.paths import Selection, select
from lamina_loom.render import (
    addendum,
    loom_context,
    merge_parts,
    node_header,
    node_parts,
    operational_memory,
)
from lamina_loom.settings import OperationalMemory, Settings

MessageRole = Literal["user", "assistant"]

#: The conceptual layers this plugin declares.
LOOM_SYSTEM = "loom_system"
LOOM_CONTEXT = "loom_context"
LOOM_LAYERS = (
    LayerSpec(
        name=LOOM_SYSTEM,
        placement="system",
        order=25,
        cut_rank=5,
        required=True,
        description="Loom system context: agent-level, tree-level, instruction sources",
    ),
    LayerSpec(
        name=LOOM_CONTEXT,
        placement="event",
        order=55,
        cut_rank=0,
        format="markdown",
        description="Loom-aware extensions: operational memory, then the loom context block",
    ),
)
ROLES: dict[str, MessageRole] = {"human": "user", "model": "assistant"}


@frozen(kw_only=True)
class SystemPiece:
    """One source of the combined system context."""

    id: str
    text: str
    trusted: bool


@frozen(kw_only=True, cache_hash=True)
class PlannedMessage:
    """One history message: its role, the nodes merged into it, its parts. Its hash is kept:
    a plan carried over to a grown tree shares its messages, each looked up once per call."""

    role: MessageRole
    nodes: tuple[str, ...]
    parts: tuple[Part, ...]

    @property
    def block_id(self) -> str:
        return "loom:" + "+".join(self.nodes)


def _strings(values: Iterable[str]) -> tuple[str, ...]:
    return tuple(values)


@frozen(kw_only=True)
class DialogueOptions:
    """What a dialogue plan depends on besides the tree and the position: the plugin's
    settings and the request's options (its agent-level context, the annotation nodes it
    includes, its permissions, its operational memory). Hashable: plans are kept by it."""

    settings: Settings
    agent_system: str | None = None
    include: tuple[str, ...] = field(default=(), converter=_strings)
    permissions: tuple[str, ...] = field(default=(), converter=_strings)
    memory: OperationalMemory | None = None


@frozen(kw_only=True)
class DialoguePlan:
    """Everything dialogue mode sends for one tree position, before fitting."""

    tree: Tree
    selection: Selection
    system: tuple[SystemPiece, ...]
    messages: tuple[PlannedMessage, ...]
    extras: tuple[Block, ...]

    @property
    def system_text(self) -> str:
        """The combined system context as one string (pieces joined by blank lines)."""
        return "\n\n".join(p.text for p in self.system)

    def protected_messages(self, minimum_recent_nodes: int) -> int:
        """How many trailing messages hold the newest ``minimum_recent_nodes`` nodes (at least
        one, so at least one message always stays)."""
        left, count = minimum_recent_nodes, 0
        for message in reversed(self.messages):
            if left <= 0:
                break
            left -= len(message.nodes)
            count += 1
        return max(1, count) if self.messages else 0


def system_pieces(
    tree: Tree, agent_system: str, instructions: Sequence[Node], loom_addendum: str = ""
) -> list[SystemPiece]:
    """Agent-level first, then tree-level, then the loom-aware addendum, then instruction
    sources in path order (the addendum, static, comes before them so it stays in the cached
    prefix while instructions change along the path).

    Agent and tree context and the addendum are operator-authored (trusted); an instruction
    source is trusted only when a human wrote it."""
    pieces = [
        SystemPiece(id="loom:system:agent", text=agent_system, trusted=True),
        SystemPiece(id="loom:system:tree", text=tree.system_context, trusted=True),
        SystemPiece(id="loom:system:addendum", text=loom_addendum, trusted=True),
        *(
            SystemPiece(
                id=f"loom:system:instruction:{n.id}",
                text=n.content,
                trusted=n.author_type == "human",
            )
            for n in instructions
        ),
    ]
    return [p for p in pieces if p.text]


def plan_dialogue(tree: Tree, current: str, options: DialogueOptions) -> DialoguePlan:
    """The Loom design's dialogue steps 1–5: traverse, filter, combine system context,
    convert, merge."""
    settings, agent_system = options.settings, options.agent_system
    selection = select(tree, current, options.include)
    system = system_pieces(
        tree,
        settings.agent_system_prompt if agent_system is None else agent_system,
        selection.instructions,
        addendum(settings),
    )
    groups: list[tuple[MessageRole, list[Node]]] = []
    for entry in selection.entries:
        role = ROLES[entry.node.author_type]
        if groups and groups[-1][0] == role:
            groups[-1][1].append(entry.node)
        else:
            groups.append((role, [entry.node]))
    messages = []
    for role, nodes in groups:
        message = planned_message(tree, role, nodes, settings)
        if message is not None:
            messages.append(message)
    if not messages:
        raise LoomError(
            f"nothing to assemble: every node on the path to {current!r} is excluded or empty "
            f"({', '.join(f'{n} ({why})' for n, why in selection.excluded) or 'all empty'})",
            tree=tree.id,
        )
    return DialoguePlan(
        tree=tree,
        selection=selection,
        system=tuple(system),
        messages=tuple(messages),
        extras=plan_extras(tree, selection.path, options),
    )


def planned_message(
    tree: Tree, role: MessageRole, nodes: Sequence[Node], settings: Settings
) -> PlannedMessage | None:
    """The message of consecutive same-role ``nodes`` (each behind its metadata line when
    ``node_metadata`` is on), ``None`` when they hold nothing to send."""
    chunks = [
        node_parts(n, n.content, node_header(tree, n) if settings.node_metadata else None)
        for n in nodes
    ]
    parts = merge_parts(chunks, settings.merge_separator)
    if not parts:
        return None
    return PlannedMessage(role=role, nodes=tuple(n.id for n in nodes), parts=parts)


def plan_extras(tree: Tree, path: Sequence[str], options: DialogueOptions) -> tuple[Block, ...]:
    """The loom-aware blocks after the path: operational memory, then the loom context."""
    settings, memory = options.settings, options.memory
    extras: list[Block] = []
    if settings.operational_memory and memory:
        extras.append(
            Block.text(
                "loom:memory",
                LOOM_CONTEXT,
                operational_memory(memory),
                title="Operational memory",
                priority=0.4,
            )
        )
    if settings.loom_context:
        extras.append(
            Block.text(
                "loom:context",
                LOOM_CONTEXT,
                loom_context(tree, path, options.permissions),
                title="Loom context",
                priority=0.6,
            )
        )
    return tuple(extras)


def plan_blocks(
    plan: DialoguePlan, message_block: Callable[[str, PlannedMessage], Block] | None = None
) -> list[Block]:
    """The plan as kernel blocks: system pieces (required, never cut), one history block per
    message (its own group; provenance names the tree and nodes), then the extras.
    ``message_block`` makes a message's block (default: ``history_block``)."""
    tree_id = plan.tree.id
    blocks = [
        Block.text(
            p.id,
            LOOM_SYSTEM,
            p.text,
            required=True,
            truncation="never",
            trusted=p.trusted,
            provenance=Provenance(source_id=tree_id),
        )
        for p in plan.system
    ]
    make = message_block or history_block
    blocks.extend(make(tree_id, message) for message in plan.messages)
    blocks.extend(plan.extras)
    return blocks


def history_block(tree_id: str, message: PlannedMessage) -> Block:
    """A planned message's history block: a value of the tree's id and the message alone."""
    return Block(
        id=message.block_id,
        layer="session",
        role=message.role,
        content=message.parts,
        truncation="never",
        provenance=Provenance(
            source_id=message.nodes[0],
            metadata={"context_json": {"loom": {"tree": tree_id, "nodes": list(message.nodes)}}},
        ),
    )

"""The Loom Tree data model (the Loom design): trees, nodes with versions, edges with role-tagged
sources, and the per-tree preferences. Frozen attrs records; ``Tree`` checks its own shape."""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime
from typing import Any, Literal

from attrs import field, frozen, validators

from lamina_loom.errors import LoomError

AuthorType = Literal["human", "model"]
SourceRole = Literal["primary", "context", "instruction"]
EdgeKind = Literal["continuation", "annotation"]
Strategy = Literal["truncateMiddle", "rollingWindow", "stopAtLimit"]

AUTHOR_TYPES: tuple[str, ...] = ("human", "model")
SOURCE_ROLES: tuple[str, ...] = ("primary", "context", "instruction")
EDGE_KINDS: tuple[str, ...] = ("continuation", "annotation")


@frozen(kw_only=True)
class NodeVersion:
    """One edit of a node's text (buffer mode resolves which version a node shows)."""

    content: str
    created_at: datetime | None = None


@frozen(kw_only=True)
class NodeImage:
    """Image content of a node (inline base64 ``data`` or a ``url``; exactly one)."""

    media_type: str
    data: str | None = None
    url: str | None = None

    def __attrs_post_init__(self) -> None:
        if (self.data is None) == (self.url is None):
            raise ValueError("a node image needs exactly one of data or url")


@frozen(kw_only=True)
class NodeMetadata:
    """The Loom design's node metadata: exclusion flags, explicit inclusion (overrides the
    annotation rule), versions and which one is active, plus author name and creation time."""

    excluded: bool = False
    pruned: bool = False
    included: bool = False
    versions: tuple[NodeVersion, ...] = ()
    active_version: int | None = None
    author: str | None = None
    created_at: datetime | None = None
    extra: dict[str, Any] = field(factory=dict)


@frozen(kw_only=True)
class Node:
    """One node of a tree: who wrote it, its text (and optional image), its metadata."""

    id: str = field(validator=validators.min_len(1))
    author_type: AuthorType = field(validator=validators.in_(AUTHOR_TYPES))
    content: str = ""
    image: NodeImage | None = None
    local_id: str | None = None
    metadata: NodeMetadata = field(factory=NodeMetadata)

    @property
    def label(self) -> str:
        """The short id shown to the model (``local_id``, else ``id``)."""
        return self.local_id or self.id


@frozen(kw_only=True)
class EdgeSource:
    """One source of an edge and its role (primary, context or instruction)."""

    node: str
    role: SourceRole = field(default="primary", validator=validators.in_(SOURCE_ROLES))


@frozen(kw_only=True)
class Edge:
    """An edge into ``target`` from its sources; exactly one source is ``primary`` (the
    parent). ``annotation`` edges attach notes that stay out of context unless included."""

    id: str = field(validator=validators.min_len(1))
    target: str
    sources: tuple[EdgeSource, ...]
    kind: EdgeKind = field(default="continuation", validator=validators.in_(EDGE_KINDS))
    #: The source nodes by role, worked out once: every walk of a path asks each edge on it.
    _roles: dict[str, tuple[str, ...]] = field(init=False, repr=False, eq=False)

    @_roles.default
    def _by_role(self) -> dict[str, tuple[str, ...]]:
        roles: dict[str, list[str]] = {}
        for s in self.sources:
            roles.setdefault(s.role, []).append(s.node)
        return {role: tuple(nodes) for role, nodes in roles.items()}

    @property
    def primary(self) -> str:
        found = self._roles.get("primary")
        if not found:
            raise LoomError(f"edge {self.id!r} has no primary source")
        return found[0]

    def with_role(self, role: str) -> tuple[str, ...]:
        return self._roles.get(role, ())


@frozen(kw_only=True)
class Preferences:
    """The Loom design's user preferences; ``None`` means "not set here" (take the app level)."""

    truncation_strategy: str | None = None
    minimum_recent_nodes: int | None = field(
        default=None, validator=validators.optional(validators.ge(0))
    )
    token_buffer: int | None = field(default=None, validator=validators.optional(validators.ge(0)))

    def over(self, base: Preferences) -> Preferences:
        """These preferences with every unset value taken from ``base``."""
        return Preferences(
            truncation_strategy=self.truncation_strategy or base.truncation_strategy,
            minimum_recent_nodes=(
                base.minimum_recent_nodes
                if self.minimum_recent_nodes is None
                else self.minimum_recent_nodes
            ),
            token_buffer=base.token_buffer if self.token_buffer is None else self.token_buffer,
        )


#: The Loom design's defaults: truncateMiddle, 4 recent nodes, 1024 tokens for the response.
DEFAULT_PREFERENCES = Preferences(
    truncation_strategy="truncateMiddle", minimum_recent_nodes=4, token_buffer=1024
)


@frozen(kw_only=True)
class Tree:
    """A Loom Tree: its nodes and edges, the tree-level system context, whether buffer mode
    includes that context, and per-tree preference overrides.

    Built trees are checked: unique ids, every edge names existing nodes and has exactly one
    primary source, at most one edge into a node, no cycle through parents.
    """

    id: str = field(validator=validators.min_len(1))
    name: str = ""
    system_context: str = ""
    buffer_mode_system_context: bool = False
    preferences: Preferences = field(factory=Preferences)
    nodes: tuple[Node, ...] = ()
    edges: tuple[Edge, ...] = ()
    _by_id: dict[str, Node] = field(init=False, repr=False, eq=False)
    _into: dict[str, Edge] = field(init=False, repr=False, eq=False)
    #: Each node's children, in edge order (a node's metadata line names them, for every node
    #: on a path: looked up, not found by scanning every edge).
    _children: dict[str, tuple[str, ...]] = field(init=False, repr=False, eq=False)

    @_by_id.default
    def _index_nodes(self) -> dict[str, Node]:
        out: dict[str, Node] = {}
        for node in self.nodes:
            if node.id in out:
                raise LoomError(f"node id {node.id!r} appears twice", tree=self.id)
            out[node.id] = node
        return out

    @_into.default
    def _index_edges(self) -> dict[str, Edge]:
        into: dict[str, Edge] = {}
        seen: set[str] = set()
        for edge in self.edges:
            where = f"edge {edge.id!r}"
            if edge.id in seen:
                raise LoomError(f"{where} appears twice", tree=self.id)
            seen.add(edge.id)
            if edge.target not in self._by_id:
                raise LoomError(
                    f"{where} points to nowhere: its target {edge.target!r} is not a node of the "
                    "tree",
                    tree=self.id,
                )
            primaries = edge.with_role("primary")
            if len(primaries) != 1:
                raise LoomError(
                    f"{where} has {len(primaries)} primary sources; exactly one is required",
                    tree=self.id,
                )
            for source in edge.sources:
                if source.node not in self._by_id:
                    raise LoomError(
                        f"{where} has a missing node: its {source.role} source {source.node!r} "
                        "is not a node of the tree",
                        tree=self.id,
                    )
            if edge.target in into:
                raise LoomError(
                    f"node {edge.target!r} has two incoming edges ({into[edge.target].id!r} and "
                    f"{edge.id!r}); a Loom Tree node has one parent",
                    tree=self.id,
                )
            into[edge.target] = edge
        return into

    @_children.default
    def _index_children(self) -> dict[str, tuple[str, ...]]:
        found: dict[str, list[str]] = {}
        for edge in self.edges:  # (each has one primary source: checked just before)
            found.setdefault(edge.primary, []).append(edge.target)
        return {parent: tuple(children) for parent, children in found.items()}

    def __attrs_post_init__(self) -> None:
        state: dict[str, int] = {}  # 1: on the current walk, 2: known to reach a root
        for start in self._by_id:
            walk: list[str] = []
            node: str | None = start
            while node is not None and state.get(node) != 2:
                if state.get(node) == 1:
                    cycle = [*walk[walk.index(node) :], node]
                    raise LoomError(
                        "cycle through parent edges: " + " -> ".join(reversed(cycle)),
                        tree=self.id,
                    )
                state[node] = 1
                walk.append(node)
                edge = self._into.get(node)
                node = edge.primary if edge else None
            for n in walk:
                state[n] = 2

    @property
    def node_ids(self) -> Collection[str]:
        """The ids of the tree's nodes (a view: looking one up costs what a dict lookup does)."""
        return self._by_id.keys()

    def node(self, node_id: str) -> Node:
        """The node ``node_id`` (``LoomError`` when the tree has no such node)."""
        found = self._by_id.get(node_id)
        if found is None:
            raise LoomError(f"node {node_id!r} is not in the tree", tree=self.id)
        return found

    def edge_into(self, node_id: str) -> Edge | None:
        """The edge whose target is ``node_id`` (``None`` for a root)."""
        return self._into.get(node_id)

    def children(self, node_id: str) -> tuple[str, ...]:
        """Nodes whose primary source is ``node_id``, in edge order."""
        return self._children.get(node_id, ())

"""Dialogue plans kept between calls: a tree position asked for again (another generation
from the same node, or the wrapper and the provider of one hook-mode request) is planned,
and turned into blocks, once while the store hands back the same tree object (stores keep a
tree decoded until it changes: see ``sqlite_store``)."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Hashable

from lamina import Block
from lamina_loom.dialogue import (
    DialogueOptions,
    DialoguePlan,
    PlannedMessage,
    history_block,
    plan_blocks,
    plan_dialogue,
)
from lamina_loom.growth import grown_plan
from lamina_loom.model import Tree

#: Plans kept, the least recently used forgotten first.
KEPT_PLANS = 8
#: History blocks kept by message (past this many, made afresh): a tree that grew by a node
#: reuses the blocks of the messages before it, which the kernel then finds unchanged.
KEPT_MESSAGES = 50_000


class Plans:
    """``plan_dialogue`` and ``plan_blocks``, memoized by everything they read. Keyed by the
    tree's identity: a plan holds its tree, so the identity is not reused while it is kept."""

    def __init__(self) -> None:
        self._kept: OrderedDict[Hashable, tuple[DialoguePlan, list[Block] | None]] = OrderedDict()
        self._lock = threading.Lock()
        self._messages: dict[tuple[str, PlannedMessage], Block] = {}
        # The newest plan of each tree and options: a tree that grew by a node is planned
        # from it.
        self._newest: OrderedDict[Hashable, DialoguePlan] = OrderedDict()

    def plan(self, tree: Tree, current: str, options: DialogueOptions) -> DialoguePlan:
        """The dialogue plan (see ``plan_dialogue``), made once per tree object and options;
        for a tree that grew by a node under the newest plan's position, carried over from
        that plan (``grown_plan``)."""
        key, stream = (id(tree), current, options), (tree.id, options)
        with self._lock:
            found = self._kept.get(key)
            if found is not None and found[0].tree is tree:
                self._kept.move_to_end(key)
                return found[0]
            newest = self._newest.get(stream)
        plan = None if newest is None else grown_plan(newest, tree, current, options)
        if plan is None:
            plan = plan_dialogue(tree, current, options)
        self._put(key, plan, None)
        with self._lock:
            self._newest[stream] = plan
            self._newest.move_to_end(stream)
            while len(self._newest) > KEPT_PLANS:
                self._newest.popitem(last=False)
        return plan

    def blocks(self, plan: DialoguePlan) -> list[Block]:
        """The plan's blocks (see ``plan_blocks``): the same list for the same plan, which the
        kernel then finds unchanged. Callers only read it."""
        key = id(plan)
        with self._lock:
            found = self._kept.get(key)
            if found is not None and found[0] is plan and found[1] is not None:
                self._kept.move_to_end(key)
                return found[1]
        blocks = plan_blocks(plan, self._message_block)
        self._put(key, plan, blocks)
        return blocks

    def _message_block(self, tree_id: str, message: PlannedMessage) -> Block:
        key = (tree_id, message)
        found = self._messages.get(key)
        if found is None:
            if len(self._messages) >= KEPT_MESSAGES:
                self._messages.clear()
            found = self._messages[key] = history_block(tree_id, message)
        return found

    def _put(self, key: Hashable, plan: DialoguePlan, blocks: list[Block] | None) -> None:
        with self._lock:
            self._kept[key] = (plan, blocks)
            self._kept.move_to_end(key)
            while len(self._kept) > 2 * KEPT_PLANS:
                self._kept.popitem(last=False)

"""Buffer mode (the Loom design): the active path as one continuous document, versions resolved, the
uncommitted working buffer appended, system context only when the tree enables it, fitted to
the budget by cutting on the tokenizer's token boundaries (as the kernel's truncators do)."""

from __future__ import annotations

from collections.abc import Collection, Sequence

from attrs import frozen

from lamina import BudgetError, Tokenizer, longest_fitting
from lamina_loom.dialogue import system_pieces
from lamina_loom.errors import LoomError
from lamina_loom.model import Preferences, Tree
from lamina_loom.paths import resolve_version, select
from lamina_loom.settings import Settings

BUFFER_STRATEGIES = ("truncateMiddle", "rollingWindow", "stopAtLimit")


@frozen(kw_only=True)
class BufferResult:
    """The document and its flags: what was cut (``removed_nodes`` whole, ``cut_nodes`` in
    part), whether the system context and the marker are in it, and the token figures."""

    document: str
    tokens: int
    available: int
    strategy: str
    truncated: bool
    system_included: bool
    working_buffer: bool
    nodes: tuple[str, ...]
    removed_nodes: tuple[str, ...] = ()
    cut_nodes: tuple[str, ...] = ()
    excluded_nodes: tuple[tuple[str, str], ...] = ()
    marker: str | None = None
    tokenizer: str = ""
    exact: bool = False
    warnings: tuple[str, ...] = ()


@frozen(kw_only=True)
class _Cut:
    head: int  # characters of the cuttable text kept at its start
    tail: int  # characters kept at its end
    marker: str


def assemble_buffer_document(
    tree: Tree,
    current: str,
    *,
    settings: Settings,
    preferences: Preferences,
    tokenizer: Tokenizer,
    available: int,
    working_buffer: str = "",
    include: Collection[str] = (),
    agent_system: str | None = None,
) -> BufferResult:
    """The Loom design's buffer steps 1–5 for ``current`` in ``tree`` within ``available``
    tokens."""
    strategy = preferences.truncation_strategy or "truncateMiddle"
    if strategy not in BUFFER_STRATEGIES:
        raise LoomError(
            f"buffer mode has no truncation strategy {strategy!r}; known: "
            + ", ".join(BUFFER_STRATEGIES),
            tree=tree.id,
            key="truncation_strategy",
        )
    selection = select(tree, current, include)
    warnings: list[str] = []
    texts: list[tuple[str, str]] = []
    for entry in selection.entries:
        node = entry.node
        if node.image is not None:
            warnings.append(f"node {node.id!r}: image left out (buffer mode is text only)")
        texts.append((node.id, resolve_version(tree, node)))

    system = ""
    if tree.buffer_mode_system_context:
        agent = settings.agent_system_prompt if agent_system is None else agent_system
        system = "\n\n".join(p.text for p in system_pieces(tree, agent, selection.instructions))
    prefix = system + settings.buffer_system_separator if system else ""

    sep = settings.buffer_separator
    pieces = [t for _, t in texts] + ([working_buffer] if working_buffer else [])
    spans: list[tuple[str, int, int]] = []
    at = 0
    for i, (node_id, text) in enumerate(texts):
        if i:
            at += len(sep)
        spans.append((node_id, at, at + len(text)))
        at += len(text)
    body = sep.join(pieces)
    if not body:
        raise LoomError(
            f"nothing to assemble: every node on the path to {current!r} is excluded or empty "
            "and there is no working buffer",
            tree=tree.id,
        )
    protected = max(1, preferences.minimum_recent_nodes or 0)
    split = spans[-protected][1] if len(spans) > protected else 0
    cuttable, recent = body[:split], body[split:]

    def result(document: str, tokens: int, cut: _Cut | None) -> BufferResult:
        removed: list[str] = []
        partial: list[str] = []
        if cut is not None:
            keep_to, keep_from = cut.head, len(cuttable) - cut.tail
            for node_id, start, end in spans:
                if end <= keep_to or start >= keep_from or start >= split:
                    continue
                if start >= keep_to and end <= keep_from:
                    removed.append(node_id)
                else:
                    partial.append(node_id)
        return BufferResult(
            document=document,
            tokens=tokens,
            available=available,
            strategy=strategy,
            truncated=cut is not None,
            system_included=bool(system),
            working_buffer=bool(working_buffer),
            nodes=tuple(n for n, _ in texts),
            removed_nodes=tuple(removed),
            cut_nodes=tuple(partial),
            excluded_nodes=selection.excluded,
            marker=cut.marker if cut and cut.marker else None,
            tokenizer=tokenizer.name,
            exact=tokenizer.exact,
            warnings=tuple(warnings),
        )

    full = prefix + body
    tokens = tokenizer.count(full)
    if tokens <= available:
        return result(full, tokens, None)
    system_tokens = tokenizer.count(prefix)
    if system_tokens > available:
        raise BudgetError(
            f"loom tree {tree.id!r}: the system context alone needs {system_tokens} tokens but "
            f"only {available} are available (over by {system_tokens - available}); the system "
            "context is never truncated",
            overage=system_tokens - available,
            available=available,
        )
    floor = tokenizer.count(prefix + recent)
    if floor > available:
        raise BudgetError(
            f"loom tree {tree.id!r}: the system context and the newest {protected} node(s)"
            f"{' and the working buffer' if working_buffer else ''} need {floor} tokens but only "
            f"{available} are available (over by {floor - available}); they are never cut",
            overage=floor - available,
            available=available,
        )
    if strategy == "stopAtLimit":
        cut, _ = _fit(prefix, cuttable, recent, "", tokenizer, available, rolling=True, floor=floor)
        keep_from = len(cuttable) - cut.tail
        gone = [n for n, s, e in spans if s < keep_from and e <= keep_from]
        part = [n for n, s, e in spans if s < keep_from < e]
        names = ", ".join(gone)
        also = f" (and part of {', '.join(part)})" if part else ""
        raise BudgetError(
            f"loom tree {tree.id!r}: the document needs {tokens} tokens but only {available} "
            f"are available ({tokens - available} over); stopAtLimit does not cut, and fitting "
            f"would have to remove: {names or 'nothing whole'}{also}",
            overage=tokens - available,
            available=available,
        )
    rolling = strategy == "rollingWindow"
    marker = settings.buffer_marker_start if rolling else settings.buffer_marker_middle
    cut, kept = _fit(
        prefix, cuttable, recent, marker, tokenizer, available, rolling=rolling, floor=floor
    )
    return result(_build(prefix, cuttable, recent, cut), kept, cut)


def _build(prefix: str, cuttable: str, recent: str, cut: _Cut) -> str:
    tail = cuttable[len(cuttable) - cut.tail :] if cut.tail else ""
    return prefix + cuttable[: cut.head] + cut.marker + tail + recent


def _fit(
    prefix: str,
    cuttable: str,
    recent: str,
    marker: str,
    tokenizer: Tokenizer,
    available: int,
    *,
    rolling: bool,
    floor: int,
) -> tuple[_Cut, int]:
    """The cut keeping the most tokens of ``cuttable`` (head and tail halves, or the tail only
    when ``rolling``) whose whole document fits; without room for the marker, no marker.
    ``floor``: the tokens of ``prefix + recent``, which with the marker's leave about the
    room the kept tokens can have (joins may merge a token or two): the search starts there.
    Returns the cut and its document's tokens."""
    bounds: Sequence[int] = tokenizer.boundaries(cuttable)
    n = len(bounds)

    def cut_for(kept: int, mark: str) -> _Cut:
        tail_tokens = kept if rolling else kept // 2
        head_tokens = kept - tail_tokens
        head = bounds[head_tokens] if head_tokens < n else len(cuttable)
        tail = len(cuttable) - bounds[n - tail_tokens] if tail_tokens else 0
        return _Cut(head=head, tail=tail, marker=mark)

    counted: dict[_Cut, int] = {}

    def tokens(c: _Cut) -> int:
        found = counted.get(c)
        if found is None:
            found = counted[c] = tokenizer.count(_build(prefix, cuttable, recent, c))
        return found

    if tokens(cut_for(0, marker)) > available:
        return cut_for(0, ""), floor  # the caller checked that prefix + recent fit
    guess = available - floor - (tokenizer.count(marker) if marker else 0)
    kept = longest_fitting(
        lambda k: tokens(cut_for(k, marker)), available, fits=0, fails=n, guess=guess
    )
    best = cut_for(kept, marker)
    return best, tokens(best)

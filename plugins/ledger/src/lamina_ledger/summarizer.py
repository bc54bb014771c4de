"""The default summarizer: deterministic and extractive (no network). It keeps what an agent
needs after compaction: the goal (from the user's first ask), the decisions (from the
assistant's prose), the open asks and exact identifiers (file paths, URLs, numbers, names in
backticks), and folds in the previous summary.

A user message recorded as sent carries the event's preamble (``Current time: …``,
``Timezone: …``, platform and hook lines) and the context placed before it; only what follows
the preamble is the user's ask. Tool output (calls, results, code blocks and logs in the
assistant's text) gives identifiers, never the goal or a decision."""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence

from lamina import Block, Summarizer, TextPart, Tokenizer, ToolCallPart, ToolResultPart

NAME = "ledger-extractive"
#: ``Block.provenance.metadata`` key marking the previous compaction's summary.
SUMMARY_KEY = "ledger_summary"

_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+")
_PATH = re.compile(r"(?<![\w/])(?:[\w.-]+/)*[\w-]+\.(?:[A-Za-z]{1,5})(?::\d+)?(?![\w/])")
_SLASHED = re.compile(r"(?<![\w])(?:\.{0,2}/)?(?:[\w.-]+/)+[\w.-]+")
_URL = re.compile(r"https?://[^\s)>\]]+")
_TICKED = re.compile(r"`([^`\n]{1,80})`")
_NUMBER = re.compile(r"(?<![\w.])\d[\d,_]*(?:\.\d+)?(?:%|ms|s|k|KB|MB|GB|x)?(?![\w.])")
_DECIDE = re.compile(
    r"\b(decid\w*|chose|choos\w*|agreed|we will|we'll|i will|i'll|going to|plan\w*|"
    r"use\b|switch\w*|keep\b|must|should|instead|fixed|changed|conclu\w*)",
    re.IGNORECASE,
)
_ASK = re.compile(
    r"(\?\s*$|^(please|can you|could you|would you|let's|add|fix|make|write|implement|"
    r"update|remove|check|find|run|explain|show|create|rename|refactor)\b)",
    re.IGNORECASE,
)
#: What every match of each identifier pattern holds: none spans a line, so only the lines
#: holding it are searched (most lines of code or prose hold no slash, digit or ``a.b``).
_HINTS = {
    _SLASHED: re.compile("/"),
    _PATH: re.compile(r"[\w-]\.[A-Za-z]"),
    _NUMBER: re.compile(r"\d"),
}
#: Characters slashed paths and dotted names are made of, and the longest run of them
#: searched for one: those patterns try again from each point of a run, so a run costs the
#: square of its length (a megabyte of ``a.a.a``, minutes). A longer run holds no identifier
#: here (no path is that long, and an identifier is clipped at ``_MAX_ITEM`` anyway).
_RUN = re.compile(r"[\w./:-]+")
_MAX_RUN = 256
_NOT_EXT = {"e.g", "i.e", "etc", "vs"}
_MAX_ITEM = 240
#: The most of the first ask the goal keeps (whole sentences, at least one).
_GOAL_CHARS = 200
#: The event preamble the kernel puts before the current message's content.
_PREAMBLE = re.compile(
    r"(?m)^Current time: [^\n]*\nTimezone: [^\n]*"
    r"(?:\n(?:Channel|Platform|Available actions|Hook [^:\n]{1,80}): [^\n]*)*"
)
_FENCE = re.compile(r"```.*?(?:```|\Z)", re.DOTALL)
#: Lines of tool output in prose: indented code, shell prompts, quotes, tables, tracebacks.
_OUTPUT_LINE = re.compile(r"^(?: {4}|\t|\s*(?:\$ |> |\||Traceback|File \"|at \S+\(|[+-]{3} ))")
_GREETING = re.compile(
    r"^(?:hi|hello|hey|thanks|thank you|good (?:morning|afternoon|evening))\b[\s\w,!.]{0,20}$",
    re.IGNORECASE,
)


def _clip(text: str, limit: int = _MAX_ITEM) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def _sentences(text: str) -> list[str]:
    return [s.strip() for s in _SENTENCE.split(text) if len(s.strip()) > 2]


def user_ask(text: str) -> str:
    """What the user wrote: the text after the event preamble when there is one (the
    context placed before the preamble is not the user's either), else all of it."""
    found = list(_PREAMBLE.finditer(text))
    return text[found[-1].end() :].strip() if found else text.strip()


def prose(text: str) -> str:
    """The assistant's own words: fenced code blocks and lines of pasted output left out."""
    lines = _FENCE.sub("\n", text).splitlines()
    return "\n".join(line for line in lines if not _OUTPUT_LINE.match(line))


def _worded(sentence: str) -> bool:
    """A sentence of words (three or more, mostly letters), not a fragment of output."""
    letters = sum(c.isalpha() or c.isspace() for c in sentence)
    return len(sentence.split()) >= 3 and letters >= 0.7 * len(sentence)


def _goal(sentences: list[str]) -> str | None:
    """The ask's leading sentences (greetings skipped), up to ``_GOAL_CHARS``."""
    asked = [s for s in sentences if not _GREETING.match(s)]
    if not asked:
        return None
    goal = asked[0]
    for s in asked[1:]:
        if len(goal) + 1 + len(s) > _GOAL_CHARS:
            break
        goal += " " + s
    return _clip(goal)


def _on_lines(rx: re.Pattern[str], text: str, *, runs: bool) -> Iterator[re.Match[str]]:
    """``rx``'s matches in ``text``, searched for on the lines that hold its hint only (the
    same matches: a search bounded to a line still sees the characters around it); with
    ``runs``, on a line longer than ``_MAX_RUN`` in its runs of path characters no longer
    than that (``rx`` matches only those characters)."""
    hint, pos, n = _HINTS[rx], 0, len(text)
    while pos <= n and (found := hint.search(text, pos)) is not None:
        start = text.rfind("\n", 0, found.start()) + 1
        end = text.find("\n", found.end())
        end = n if end < 0 else end
        if not runs or end - start <= _MAX_RUN:
            yield from rx.finditer(text, start, end)
        else:
            for run in _RUN.finditer(text, start, end):
                first, last = run.span()
                if last - first <= _MAX_RUN and hint.search(text, first, last):
                    yield from rx.finditer(text, first, last)
        pos = end + 1


def identifiers(text: str, *, numbers: bool) -> list[str]:
    """Exact identifiers in ``text``, in order of appearance, without repeats (none from a
    run of path characters longer than ``_MAX_RUN``)."""
    found = [(m.start(), m.group(0).rstrip(".,;:")) for m in _URL.finditer(text)]
    for rx in (_SLASHED, _PATH):
        found += [(m.start(), m.group(0).rstrip(".,;:")) for m in _on_lines(rx, text, runs=True)]
    found += [(m.start(1), m.group(1)) for m in _TICKED.finditer(text)]
    if numbers:
        found += [(m.start(), m.group(0).rstrip(",")) for m in _on_lines(_NUMBER, text, runs=False)]
    out: list[str] = []
    for _, ident in sorted(found):
        if ident.lower() in _NOT_EXT or (len(ident) < 2 and not ident.isdigit()):
            continue
        if ident not in out and not any(ident in o for o in out if "/" in o):
            out.append(ident)
    return out


#: A section's items, oldest first (a dict's keys: moving one to the end is one step).
Bucket = dict[str, None]


class _Notes:
    def __init__(self) -> None:
        self.goal: str | None = None
        self.decisions: Bucket = {}
        self.asks: Bucket = {}
        self.idents: Bucket = {}
        self.tools: Bucket = {}

    def add(self, bucket: Bucket, item: str) -> None:
        item = _clip(item)
        bucket.pop(item, None)
        bucket[item] = None  # newest last

    def prior(self, text: str) -> None:
        """Fold a previous summary (this summarizer's own layout) back in."""
        section = None
        for line in text.splitlines():
            line = line.strip()
            if line.startswith("Goal:"):
                self.goal = self.goal or line[5:].strip() or None
            elif line.endswith(":") and line[:-1] in _SECTIONS:
                section = line[:-1]
            elif line.startswith("- ") and section:
                bucket = self._bucket(section)
                if section == "Identifiers":
                    for ident in line[2:].split(", "):
                        self.add(bucket, ident)
                else:
                    self.add(bucket, line[2:])
            elif line and not line.startswith("["):
                self.add(self.decisions, line)

    def _bucket(self, section: str) -> Bucket:
        return {
            "Decisions": self.decisions,
            "Open asks": self.asks,
            "Identifiers": self.idents,
            "Tools used": self.tools,
        }[section]

    def text(self, role: str | None, text: str) -> None:
        if role == "user":
            text = user_ask(text)
        for ident in identifiers(text, numbers=True):
            self.add(self.idents, ident)
        if role == "user":
            sentences = _sentences(text)
            if self.goal is None:
                self.goal = _goal(sentences)
            for s in sentences:
                if _ASK.search(s) and s not in (self.goal or ""):
                    self.add(self.asks, s)
        elif role == "assistant":
            for s in _sentences(prose(text)):
                if _DECIDE.search(s) and _worded(s):
                    self.add(self.decisions, s)

    def call(self, part: ToolCallPart) -> None:
        args = ", ".join(f"{k}={v!r}" for k, v in sorted(part.arguments.items()))
        self.add(self.tools, f"{part.name}({_clip(args, 120)})")
        for value in part.arguments.values():
            if isinstance(value, str):
                for ident in identifiers(value, numbers=False) or [_clip(value, 80)]:
                    self.add(self.idents, ident)

    def result(self, part: ToolResultPart) -> None:
        head = part.content[:4000]
        for ident in identifiers(head, numbers=False)[:8]:
            self.add(self.idents, ident)


_SECTIONS = ("Decisions", "Open asks", "Identifiers", "Tools used")


def summarize(blocks: Sequence[Block], max_tokens: int, tokenizer: Tokenizer) -> str:
    """An extractive summary of ``blocks`` in at most ``max_tokens`` tokens (newest facts win
    when not everything fits; the goal always comes first)."""
    notes = _Notes()
    for block in blocks:
        if block.provenance.metadata.get(SUMMARY_KEY):
            notes.prior(block.body)
            continue
        for part in block.content:
            if isinstance(part, TextPart):
                notes.text(block.role, part.text)
            elif isinstance(part, ToolCallPart):
                notes.call(part)
            elif isinstance(part, ToolResultPart):
                notes.result(part)
    return _render_within(notes, max_tokens, tokenizer)


def _render(goal: str | None, chosen: dict[str, list[str]]) -> str:
    lines = [f"Goal: {goal}"] if goal else []
    for section in _SECTIONS:
        items = chosen.get(section) or []
        if not items:
            continue
        lines.append(f"{section}:")
        if section == "Identifiers":
            lines.append("- " + ", ".join(items))
        else:
            lines += [f"- {i}" for i in items]
    return "\n".join(lines)


def _render_within(notes: _Notes, max_tokens: int, tokenizer: Tokenizer) -> str:
    goal = notes.goal
    if goal and tokenizer.count(f"Goal: {goal}") > max_tokens:
        goal = _clip(goal, max(8, 4 * max_tokens // 2))
    pools = {
        "Open asks": list(reversed(notes.asks)),
        "Decisions": list(reversed(notes.decisions)),
        "Identifiers": list(reversed(notes.idents)),
        "Tools used": list(reversed(notes.tools)),
    }
    chosen: dict[str, list[str]] = {k: [] for k in pools}
    # Round-robin over the sections, newest first, so no one section starves the others.
    order = ["Open asks", "Decisions", "Identifiers", "Identifiers", "Tools used"]
    used = tokenizer.count(_render(goal, chosen))
    if used > max_tokens:
        return ""
    exhausted: set[str] = set()
    while len(exhausted) < len(pools):
        for section in order:
            if section in exhausted:
                continue
            if not pools[section]:
                exhausted.add(section)
                continue
            item = pools[section].pop(0)
            chosen[section].insert(0, item)  # keep oldest-first order in the text
            cost = tokenizer.count(item) + 3
            if used + cost > max_tokens:
                chosen[section].pop(0)
                exhausted.add(section)
                continue
            used += cost
    text = _render(goal, chosen)
    while chosen and tokenizer.count(text) > max_tokens:  # estimates undercounted: trim
        longest = max(chosen, key=lambda k: len(chosen[k]))
        if not chosen[longest]:
            return _render(goal, {})
        chosen[longest].pop(0)
        text = _render(goal, chosen)
    return text


def summarizer() -> Summarizer:
    """The record ``lamina_summarizers`` returns."""
    return Summarizer(
        name=NAME,
        summarize=summarize,
        description="deterministic extractive summary: goal, decisions, open asks, identifiers",
    )

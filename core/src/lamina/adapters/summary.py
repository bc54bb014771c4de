"""The LLM summarizer: compaction summaries written by a model through any adapter that sends.

The prompt asks for what a compaction summary must keep (the Broker design's summary replaces
the turns it covers, so the agent continues from it alone): the goal, the decisions, the open
asks and the exact identifiers, in the layout of the ledger's extractive summary, so either
summarizer folds the other's summary in. Custom instructions (configured, and per call), a
token cap and the previous summary are added; the conversation is sent as a transcript that
fits the summarizing model's window (long tool results cut in the middle, the middle of the
conversation left out when it is still too long).
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from lamina.errors import LaminaError
from lamina.model import (
    AssembledContext,
    Block,
    Message,
    ModelConfig,
    TextPart,
    TokenBudget,
    ToolCallPart,
    ToolResultPart,
)
from lamina.records import Adapter, Summarizer, Tokenizer

COMPACTION_PROMPT = """\
You compact the history of a conversation between a user and an AI agent. Your summary \
replaces the turns it covers: the agent continues from it and from the newest turns alone, \
so it must hold everything still needed to carry on.

Write it in exactly this layout, plain text, no preamble:

Goal: <the user's overall goal, from their first ask, in one or two sentences>
Decisions:
- <something decided, done or found out, with the reason when one was given>
Open asks:
- <something the user asked for that is not done yet>
Identifiers:
- <exact file paths, URLs, names, ids, numbers and commands the work depends on, comma separated>

Rules:
- A previous summary, when given, covers what was compacted before: fold it in, keep what \
still holds, drop what was superseded.
- Tool output is evidence, not a decision: keep only what it established and the \
identifiers found in it.
- Lines such as "Current time:", "Timezone:", "Platform:" or "Hook …:" that open a user \
message were added by the host; they are not the user's ask.
- Copy identifiers verbatim. Leave out pleasantries and whatever the agent can read again.
- Newer facts win over older ones."""

#: Characters kept of one tool result in the transcript (head and tail).
RESULT_CHARS = 2000
#: Context window assumed for a summarizing model whose limits are not known.
DEFAULT_WINDOW = 32_000
#: Share of the window the transcript may fill (the rest: prompt, reply, counting error).
INPUT_SHARE = 0.75


class SummaryError(LaminaError):
    """The LLM summarizer made no summary (no ``send``, or an empty reply)."""


def llm_summarizer(
    adapter: Adapter,
    *,
    model: str,
    name: str = "llm",
    instructions: str | None = None,
    max_tokens: int | None = None,
    context_window: int | None = None,
    description: str = "",
) -> Summarizer:
    """A ``Summarizer`` whose summaries ``model`` writes through ``adapter.send``.

    ``instructions`` are added to the compaction prompt every time (a call's own
    ``instructions`` after them); ``max_tokens`` caps every summary (the caller's limit too);
    ``context_window`` is the summarizing model's, which the transcript is fitted to. Any
    failure (no SDK, the provider's error, an empty reply) raises, so the caller can fall back
    to another summarizer."""

    def summarize(
        blocks: Sequence[Block],
        limit: int,
        tokenizer: Tokenizer,
        *,
        instructions: str | None = None,
    ) -> str:
        cap = min(limit, max_tokens or limit)
        if adapter.send is None:
            raise SummaryError(f"summarizer {name!r}: adapter {adapter.name!r} cannot send")
        if cap <= 0:
            raise SummaryError(f"summarizer {name!r}: no room for a summary (limit {limit})")
        context = summary_context(
            blocks,
            model=model,
            provider=adapter.name,
            cap=cap,
            instructions=[i for i in (configured, instructions) if i and i.strip()],
            tokenizer=tokenizer,
            context_window=context_window or DEFAULT_WINDOW,
        )
        result = adapter.send(context, {"max_tokens": reply_limit(cap)})
        text = result.messages[-1].text.strip() if result.messages else ""
        if not text:
            raise SummaryError(
                f"summarizer {name!r}: the model's reply was empty "
                f"(stop reason {result.stop_reason!r})"
            )
        return within(text, cap, tokenizer)

    configured = instructions
    return Summarizer(
        name=name,
        summarize=summarize,
        description=description or f"{model} through adapter {adapter.name!r}: compaction prompt",
    )


def reply_limit(cap: int) -> int:
    """Tokens the reply may take: the cap and room for the model counting differently (the
    reply is cut to the cap by the caller's tokenizer afterwards)."""
    return cap + max(256, cap // 2)


def prompt(cap: int, instructions: Sequence[str]) -> str:
    """The compaction prompt with the cap and any custom instructions."""
    text = f"{COMPACTION_PROMPT}\n- Write at most {cap} tokens."
    if instructions:
        text += "\n\nAdditional instructions:\n" + "\n".join(i.strip() for i in instructions)
    return text


def summary_context(
    blocks: Sequence[Block],
    *,
    model: str,
    provider: str,
    cap: int,
    instructions: Sequence[str],
    tokenizer: Tokenizer,
    context_window: int,
) -> AssembledContext:
    """The request that asks ``model`` for the summary: the prompt as the system prompt, the
    previous summary and the transcript as the one user message."""
    system = prompt(cap, instructions)
    previous = [p for b in blocks if (p := previous_summary(b)) is not None]
    rest = [b for b in blocks if previous_summary(b) is None]
    room = int(context_window * INPUT_SHARE) - reply_limit(cap) - tokenizer.count(system)
    pieces = [f"<previous_summary>\n{p}\n</previous_summary>" for p in previous]
    room -= sum(tokenizer.count(p) for p in pieces)
    pieces.append(f"<conversation>\n{transcript(rest, tokenizer, max(room, 0))}\n</conversation>")
    pieces.append("Write the summary of the conversation above now.")
    message = Message.of("user", "\n\n".join(pieces))
    window = max(context_window, reply_limit(cap) + 1)
    return AssembledContext(
        system_prompt=system,
        history=(),
        current_message=message,
        tools=(),
        model=model,
        provider=provider,
        model_config=ModelConfig(max_tokens=reply_limit(cap)),
        token_budget=TokenBudget.plan(model_limit=window, reserve_response=reply_limit(cap)),
        session_label="",
        role="unified",
        workspace_path="",
    )


def previous_summary(block: Block) -> str | None:
    """The text of an earlier compaction's summary (``provenance.metadata["summary"]``, as the
    ledger marks it), or ``None`` for any other block."""
    found = block.provenance.metadata.get("summary")
    return found if isinstance(found, str) else None


def transcript(blocks: Sequence[Block], tokenizer: Tokenizer, room: int) -> str:
    """The blocks as a role-labelled transcript within ``room`` tokens: each tool result cut
    to its head and tail; when still too long, the first entry (the first ask) and the newest
    that fit, with a marker where the middle was left out."""
    names = {p.id: p.name for b in blocks for p in b.content if isinstance(p, ToolCallPart)}
    entries = [e for b in blocks if (e := _entry(b, names))]
    sizes = [tokenizer.count(e) + 1 for e in entries]
    if sum(sizes) <= room or len(entries) < 2:
        return "\n".join(entries)
    kept, used = [], sizes[0]
    for i in range(len(entries) - 1, 0, -1):
        if used + sizes[i] > room:
            break
        kept.append(i)
        used += sizes[i]
    left_out = len(entries) - 1 - len(kept)
    gap = f"[… {left_out} message{'s' if left_out != 1 else ''} left out here …]"
    return "\n".join([entries[0], gap, *(entries[i] for i in reversed(kept))])


def _entry(block: Block, names: dict[str, str]) -> str:
    role = block.role or block.layer
    lines: list[str] = []
    for part in block.content:
        if isinstance(part, TextPart) and part.text.strip():
            lines.append(f"[{role}] {part.text.strip()}")
        elif isinstance(part, ToolCallPart):
            args = json.dumps(part.arguments, ensure_ascii=False, sort_keys=True)
            lines.append(f"[{role} calls tool {part.name}] {_middle_cut(args, 500)}")
        elif isinstance(part, ToolResultPart):
            kind = "error" if part.is_error else "result"
            tool = names.get(part.call_id, part.call_id)
            lines.append(f"[tool {kind} of {tool}] {_middle_cut(part.content, RESULT_CHARS)}")
        elif not isinstance(part, TextPart):
            lines.append(f"[{role} sent an image]")
    return "\n".join(lines)


def _middle_cut(text: str, limit: int) -> str:
    text = text.strip()
    if len(text) <= limit:
        return text
    head, tail = text[: limit * 2 // 3], text[-(limit // 3) :]
    return f"{head}\n[… {len(text) - len(head) - len(tail):,} characters left out …]\n{tail}"


def within(text: str, limit: int, tokenizer: Tokenizer) -> str:
    """``text`` cut to at most ``limit`` tokens, at a line end where one is near."""
    while text and tokenizer.count(text) > limit:
        bounds = tokenizer.boundaries(text)
        cut = min(bounds[limit] if 0 <= limit < len(bounds) else len(text), len(text) - 1)
        line = text.rfind("\n", 0, cut)
        text = text[: line if line > cut // 2 else cut].rstrip()
    return text

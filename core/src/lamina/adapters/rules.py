"""Providers' documented rules for names and ids in a request, and the error for breaking one.

An adapter checks what it sends against these before the provider sees it, so a bad tool name
is a clear error naming the tool and the rule instead of an HTTP 400 later.
"""

from __future__ import annotations

import re
from typing import Any

from attrs import frozen

from lamina.errors import ConfigError


class PayloadError(ConfigError):
    """A request the provider would reject: names the adapter, the offending value, where it
    is in the context (``key``) and the rule it breaks."""

    def __init__(self, message: str, *, adapter: str, value: Any, key: str | None = None) -> None:
        self.adapter = adapter
        self.value = value
        super().__init__(f"adapter {adapter!r}: {message}", key=key)


@frozen(kw_only=True)
class NameRule:
    """One provider rule for a name: what it names, the pattern (matched in full) and the
    rule in words, as the provider documents it."""

    what: str
    pattern: str
    provider: str
    words: str

    def check(self, value: Any, *, adapter: str, key: str | None = None) -> str:
        """``value`` when it follows the rule; else ``PayloadError``."""
        if isinstance(value, str) and re.fullmatch(self.pattern, value):
            return value
        raise PayloadError(
            f"{self.what} {value!r} breaks {self.provider}'s rule ^{self.pattern}$ ({self.words})",
            adapter=adapter,
            value=value,
            key=key,
        )


#: OpenAI function names (Chat Completions and Responses).
OPENAI_TOOL_NAME = NameRule(
    what="tool name",
    pattern=r"[a-zA-Z0-9_-]{1,64}",
    provider="OpenAI",
    words="letters, digits, underscores and dashes, 1 to 64 characters",
)
#: Anthropic tool names (``tools[].name`` and ``tool_use.name``).
ANTHROPIC_TOOL_NAME = NameRule(
    what="tool name",
    pattern=r"[a-zA-Z0-9_-]{1,64}",
    provider="Anthropic",
    words="letters, digits, underscores and dashes, 1 to 64 characters",
)
#: Anthropic ``tool_use`` ids (and the ``tool_use_id`` of their results).
ANTHROPIC_TOOL_USE_ID = NameRule(
    what="tool_use id",
    pattern=r"[a-zA-Z0-9_-]+",
    provider="Anthropic",
    words="letters, digits, underscores and dashes",
)
#: Gemini function names: the Gemini API allows letters, digits, underscores, colons, dots
#: and dashes, at most 64; Vertex AI also asks for a letter or underscore first, so both hold.
GEMINI_FUNCTION_NAME = NameRule(
    what="function name",
    pattern=r"[a-zA-Z_][a-zA-Z0-9_.:-]{0,63}",
    provider="Gemini",
    words="a letter or underscore, then letters, digits, underscores, colons, dots and "
    "dashes, 64 characters at most",
)

"""A plugin's tokenizer as the kernel calls it: every answer is checked, and a wrong one (a
count that is not a non-negative int, boundaries outside the text, an exception) is a
``PluginError`` naming the plugin, never a wrong budget."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from lamina.errors import LaminaError, PluginError
from lamina.offsets import LongTexts
from lamina.records import Tokenizer
from lamina.tokenizers import LONG_TEXT, LONG_TEXT_TOKENS


def _shown(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


class CheckedTokenizer:
    """A plugin's tokenizer as the kernel uses it: a count that is not a non-negative int,
    boundaries that are not non-decreasing offsets inside the text, or an exception, is a
    ``PluginError`` naming the plugin."""

    __slots__ = ("_long", "plugin", "tokenizer")

    def __init__(self, tokenizer: Tokenizer, plugin: str | None = None) -> None:
        self.tokenizer = tokenizer
        self.plugin = plugin
        # A long text's checked offsets, kept as the kernel's tokenizers keep theirs: a big
        # tool result capped on every request is not tokenized and checked again each time.
        self._long = LongTexts(LONG_TEXT_TOKENS)

    @property
    def name(self) -> str:
        return self.tokenizer.name

    @property
    def exact(self) -> bool:
        return self.tokenizer.exact

    def __getattr__(self, attribute: str) -> Any:  # ``revision`` and the like
        return getattr(self.tokenizer, attribute)

    def _error(self, message: str) -> PluginError:
        return PluginError(f"tokenizer {self.tokenizer.name!r} {message}", plugin=self.plugin)

    def count(self, text: str) -> int:
        try:
            value: object = self.tokenizer.count(text)
        except LaminaError:
            raise
        except Exception as exc:
            raise self._error(f"raised {type(exc).__name__} in count(): {exc}") from exc
        if type(value) is int and value >= 0:
            return value
        if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
            return int(value)
        raise self._error(f"count() returned {_shown(value)}; expected a non-negative int")

    def boundaries(self, text: str) -> Sequence[int]:
        if len(text) >= LONG_TEXT:
            return self._long.get(text, self._boundaries)
        return self._boundaries(text)

    def _boundaries(self, text: str) -> list[int]:
        try:
            offsets = list(self.tokenizer.boundaries(text))
        except LaminaError:
            raise
        except Exception as exc:
            raise self._error(f"raised {type(exc).__name__} in boundaries(): {exc}") from exc
        previous = 0
        for offset in offsets:
            if type(offset) is not int or not previous <= offset < len(text):
                raise self._error(
                    f"boundaries() gave {_shown(offset)} after {previous} for a text of "
                    f"{len(text)} characters; expected non-decreasing offsets inside it"
                )
            previous = offset
        return offsets

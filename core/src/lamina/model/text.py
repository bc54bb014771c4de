"""Text as it enters the data model: always encodable as UTF-8.

Python strings may hold lone surrogates (from ``surrogateescape`` decoding, broken JSON,
hostile input). They cannot be written as UTF-8, so one of them would break every JSON
output and provider payload that carries it. The model's text fields pass through ``clean``:
a valid surrogate pair becomes its character, a lone surrogate becomes U+FFFD.
"""

from __future__ import annotations

from typing import Any


def clean(text: str) -> str:
    """``text`` with lone surrogates replaced (unchanged, and cheap, when it has none)."""
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    return text


def clean_data(value: Any) -> Any:
    """JSON-like data with every string (keys included) cleaned."""
    if isinstance(value, str):
        return clean(value)
    if isinstance(value, dict):
        return {clean_data(k): clean_data(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(clean_data(v) for v in value)
    return value


def is_clean_data(value: Any) -> bool:
    """Whether every string in JSON-like ``value`` (keys included) is already encodable, so
    ``clean_data`` would change nothing. Allocates nothing, so checking a large payload does
    not wake the garbage collector the way copying it does. (A payload is mostly short ASCII
    strings in small dicts: those are checked in the loop, without a call each.)"""
    if isinstance(value, str):
        return value.isascii() or clean(value) is value
    if isinstance(value, dict):
        for key, item in value.items():
            if type(key) is str and key.isascii():
                pass
            elif not is_clean_data(key):
                return False
            if type(item) is str and item.isascii():
                continue
            if not is_clean_data(item):
                return False
        return True
    if isinstance(value, list | tuple):
        for item in value:
            if type(item) is str and item.isascii():
                continue
            if not is_clean_data(item):
                return False
    return True

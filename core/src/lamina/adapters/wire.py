"""Wire helpers: reading provider responses and errors, the reply limit, sampling, and making a
payload encodable.

A response may be the SDK's object or its JSON (a dict), with snake_case or camelCase keys;
``dig`` reads either.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from typing import Any

from lamina.model import AssembledContext
from lamina.model.text import clean_data, is_clean_data
from lamina.records import ModelInfo


def dig(obj: Any, *path: str) -> Any:
    """``obj.a.b`` or ``obj["a"]["b"]`` (camelCase or snake_case), ``None`` when missing."""
    for name in path:
        if obj is None:
            return None
        camel = re.sub(r"_([a-z])", lambda m: m.group(1).upper(), name)
        if isinstance(obj, Mapping):
            obj = obj.get(name, obj.get(camel))
        else:
            obj = getattr(obj, name, getattr(obj, camel, None))
    return obj


def count(obj: Any, *path: str) -> int:
    """An integer field (0 when absent or null)."""
    value = dig(obj, *path)
    return int(value) if isinstance(value, int | float) and value > 0 else 0


def error_text(error: Any) -> str:
    """Everything an error says (message, code, type, body) as one lower-cased string."""
    if isinstance(error, str):
        return error.lower()
    if isinstance(error, Mapping):
        return json.dumps(error, default=str).lower()
    pieces = [str(error)]
    for attr in ("message", "code", "type", "status", "body"):
        value = getattr(error, attr, None)
        if value is not None:
            pieces.append(json.dumps(value, default=str))
    return " ".join(pieces).lower()


def overflow_detector(*markers: str) -> Callable[[Any], bool]:
    """An ``is_context_overflow`` that says yes when the error's text holds any of ``markers``
    (lower case), and for a ``ContextOverflowError`` an adapter's ``send`` raised."""

    def is_context_overflow(error: Any) -> bool:
        from lamina.adapters.send import SendError

        if isinstance(error, SendError):  # already classified when it was raised
            return error.overflow
        text = error_text(error)
        return any(marker in text for marker in markers)

    return is_context_overflow


def planned_info(context: AssembledContext, provider: str) -> ModelInfo | None:
    """The ``ModelInfo`` the kernel planned ``context`` with, when it is ``provider``'s (so an
    adapter need not look the model up again); ``None`` otherwise, e.g. for a context built
    by hand or planned with another provider's or the kernel's fallback knowledge."""
    info = context.model_info
    return info if info is not None and info.provider == provider else None


def reply_tokens(
    context: AssembledContext, options: Mapping[str, Any], max_output: int | None, default: int
) -> int:
    """Tokens to allow for the reply: the ``max_tokens`` option, else the model config's, else
    what the budget reserved for the response, else ``default``; never above ``max_output``."""
    wanted = (
        options.get("max_tokens")
        or context.model_config.max_tokens
        or context.token_budget.reserve_response
        or default
    )
    return min(int(wanted), max_output) if max_output else int(wanted)


def sampling(context: AssembledContext) -> dict[str, Any]:
    """The model config's temperature (when set) under the name every provider here uses."""
    temperature = context.model_config.temperature
    return {} if temperature is None else {"temperature": temperature}


def data_url(media_type: str, data: str) -> str:
    """An inline image as a ``data:`` URL."""
    return f"data:{media_type};base64,{data}"


def json_safe(data: Any) -> Any:
    """``data`` with every string in it (keys too) made encodable as UTF-8, the data model's
    own rule (``lamina.model.text``): a lone surrogate becomes U+FFFD, a split pair is joined.
    Text enters the model clean; this keeps what an adapter composes from it clean as well,
    since a provider rejects (or an HTTP client fails on) a body that cannot be encoded.
    ``data`` itself when it is already so (nearly always), else a cleaned copy."""
    return data if is_clean_data(data) else clean_data(data)

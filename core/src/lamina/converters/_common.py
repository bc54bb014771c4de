"""What the converters share: reading a field with a clear error, and image data URLs."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lamina.errors import SerdeError
from lamina.model.messages import ImagePart


def need(value: Any, kind: type | tuple[type, ...], where: str, what: str) -> Any:
    """``value`` if it is a ``kind``, else a ``SerdeError`` saying where and what was expected."""
    if not isinstance(value, kind):
        raise SerdeError([f"expected {what}, got {type(value).__name__} @ {where}"], what=WHAT)
    return value


def field(item: Mapping[str, Any], key: str, kind: type | tuple[type, ...], where: str) -> Any:
    if key not in item:
        raise SerdeError([f"missing {key!r} @ {where}"], what=WHAT)
    return need(item[key], kind, f"{where}.{key}", _kind_name(kind))


def image_from_url(url: str) -> ImagePart:
    """An image part from a URL, decoding ``data:`` URLs into inline data."""
    if url.startswith("data:") and ";base64," in url:
        head, data = url.split(",", 1)
        return ImagePart(media_type=head[5:].split(";")[0] or "image/png", data=data)
    return ImagePart(media_type="image/*", url=url)


def _kind_name(kind: type | tuple[type, ...]) -> str:
    kinds = kind if isinstance(kind, tuple) else (kind,)
    names = {str: "a string", list: "a list", dict: "an object", bool: "true or false"}
    return " or ".join(names.get(k, k.__name__) for k in kinds)


WHAT = "history messages"

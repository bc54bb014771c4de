"""The tools a host offers, decoded once: a host sends the same list with every request, and
decoding hundreds of tools (each schema's strings checked) took milliseconds a request. The
same ``Tool`` objects then let the kernel (``lamina.assembly.tool_json``) and the reply's
encoder reuse what they made of them on the requests before.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from attrs import evolve

from lamina.model.request import Tool
from lamina.serde import structure
from lamina.serve.wire import AssemblyInput

#: Lists of tools kept, the least recently sent going first.
LISTS = 16
#: At most this many bytes of their JSON kept in all.
KEPT_BYTES = 16 * 1024 * 1024


class DecodedTools:
    """``AssemblyInput`` from a request's JSON, its ``tools`` taken from a list sent before
    when it is the same JSON (``dumps`` of it, byte for byte)."""

    def __init__(self, dumps: Callable[[Any], bytes]) -> None:
        self._dumps = dumps
        self._kept: OrderedDict[bytes, tuple[Tool, ...]] = OrderedDict()
        self._held = 0
        self._lock = threading.Lock()

    def structure(self, data: Any) -> AssemblyInput:
        """The request body as ``structure`` makes it (the same errors, the same value)."""
        tools = data.get("tools") if isinstance(data, dict) else None
        if not isinstance(tools, list) or not tools:
            return structure(data, AssemblyInput, what="AssemblyInput")
        try:
            key: bytes | None = self._dumps(tools)
        except (TypeError, ValueError):  # (a lone surrogate the JSON writers refuse)
            key = None
        found = None
        if key is not None:
            with self._lock:
                found = self._kept.get(key)
                if found is not None:
                    self._kept.move_to_end(key)
        if found is None:
            body = structure(data, AssemblyInput, what="AssemblyInput")
            if key is not None:
                self._keep(key, body.tools)
            return body
        rest = {name: value for name, value in data.items() if name != "tools"}
        return evolve(structure(rest, AssemblyInput, what="AssemblyInput"), tools=found)

    def _keep(self, key: bytes, tools: tuple[Tool, ...]) -> None:
        if len(key) > KEPT_BYTES:
            return
        with self._lock:
            if key not in self._kept:
                self._held += len(key)
            self._kept[key] = tools
            while len(self._kept) > LISTS or self._held > KEPT_BYTES:
                self._held -= len(self._kept.popitem(last=False)[0])

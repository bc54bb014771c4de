"""Testing adapters: the conformance suite, hand-built contexts, the strict request-type
checker and the command-line payload helper, under the one name plugin tests import.

The pieces live in their own modules (``adapter_suite``, ``adapter_contexts``, ``strict``,
``cli_payload``); this module re-exports their public names.
"""

from __future__ import annotations

from lamina.testing.adapter_contexts import (
    LONG_SYSTEM,
    PNG,
    SCENARIOS,
    TOOLS,
    make_context,
    random_history,
)
from lamina.testing.adapter_suite import AdapterConformance, ToolEvent
from lamina.testing.cli_payload import payload_from_cli
from lamina.testing.strict import StrictTypeError, strict_check

__all__ = [
    "LONG_SYSTEM",
    "PNG",
    "SCENARIOS",
    "TOOLS",
    "AdapterConformance",
    "StrictTypeError",
    "ToolEvent",
    "make_context",
    "payload_from_cli",
    "random_history",
    "strict_check",
]

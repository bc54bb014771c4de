"""Lamina adapters for OpenAI's Chat Completions (``openai``) and Responses
(``openai-responses``) APIs, OpenAI model limits, and exact prompt token counting; with the
``sdk`` extra the adapters also send (``send`` / ``asend``), and ``[plugins.openai.summarizer]``
registers the ``openai-llm`` summarizer.

``plugin`` is the object the ``lamina`` entry point names; the rest of the adapter's plumbing
comes from the kernel's adapter kit, ``lamina.adapters``.
"""

from __future__ import annotations

from functools import partial

from lamina import Adapter
from lamina.adapters import AdapterPlugin
from lamina_openai import chat, responses, send
from lamina_openai.models import PROVIDER, model_info
from lamina_openai.settings import OpenAISettings


def adapters(settings: OpenAISettings) -> list[Adapter]:
    """``openai`` (Chat Completions) and ``openai-responses`` (Responses)."""
    return [
        Adapter(
            name="openai",
            build_request=partial(chat.build, settings=settings),
            parse_usage=chat.parse_usage,
            is_context_overflow=chat.is_context_overflow,
            description="OpenAI Chat Completions (POST /v1/chat/completions)",
        ),
        Adapter(
            name="openai-responses",
            build_request=partial(responses.build, settings=settings),
            parse_usage=chat.parse_usage,
            is_context_overflow=chat.is_context_overflow,
            description="OpenAI Responses (POST /v1/responses)",
        ),
    ]


#: The plugin: both adapters (sending through the ``openai`` SDK), OpenAI model info from
#: models.dev with ``[plugins.openai.models]`` overrides (tiktoken counts these models: no
#: tokenizer here), and the LLM summarizer when ``[plugins.openai.summarizer]`` is set.
plugin = AdapterPlugin(
    provider=PROVIDER,
    settings_class=OpenAISettings,
    adapters=adapters,
    model_info=model_info,
    transport=send.transport,
)

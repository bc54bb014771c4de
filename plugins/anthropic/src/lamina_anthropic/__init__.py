"""Lamina adapter for Anthropic's Messages API: native system blocks, ``cache_control``
breakpoints, Claude model limits and a calibrated token estimate; with the ``sdk`` extra the
adapter also sends (``send`` / ``asend``), and ``[plugins.anthropic.summarizer]`` registers the
``anthropic-llm`` summarizer.

``plugin`` is the object the ``lamina`` entry point names; the plumbing comes from the
kernel's adapter kit, ``lamina.adapters``.
"""

from __future__ import annotations

from functools import partial

from lamina import Adapter
from lamina.adapters import AdapterPlugin, CalibratedEstimate
from lamina_anthropic import messages, send
from lamina_anthropic.models import PROVIDER, model_info
from lamina_anthropic.settings import AnthropicSettings


def adapters(settings: AnthropicSettings) -> list[Adapter]:
    return [
        Adapter(
            name=PROVIDER,
            build_request=partial(messages.build, settings=settings),
            parse_usage=messages.parse_usage,
            is_context_overflow=messages.is_context_overflow,
            description="Anthropic Messages (POST /v1/messages)",
        )
    ]


#: The plugin: the adapter, Claude model info from models.dev with
#: ``[plugins.anthropic.models]`` overrides, and, as Claude has no offline tokenizer, an
#: estimate flagged inexact and calibratable from usage; sending through the ``anthropic`` SDK.
plugin = AdapterPlugin(
    provider=PROVIDER,
    settings_class=AnthropicSettings,
    adapters=adapters,
    model_info=model_info,
    tokenizer=partial(CalibratedEstimate, chars_per_token=3.5, label="claude-estimate"),
    transport=send.transport,
)

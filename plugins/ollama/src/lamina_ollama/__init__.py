"""Lamina adapter for Ollama's native chat API (``POST /api/chat``): a system message first,
tool calls and ``tool`` messages, base64 images, and ``num_ctx`` set to the planned window;
with the ``sdk`` extra the adapter also sends (``send`` / ``asend``), and
``[plugins.ollama.summarizer]`` registers the ``ollama-llm`` summarizer.

``plugin`` is the object the ``lamina`` entry point names; the plumbing comes from the
kernel's adapter kit, ``lamina.adapters``.
"""

from __future__ import annotations

from functools import partial

from lamina import Adapter
from lamina.adapters import AdapterPlugin, CalibratedEstimate
from lamina_ollama import chat, send
from lamina_ollama.models import PROVIDER, model_info
from lamina_ollama.settings import OllamaSettings


def adapters(settings: OllamaSettings) -> list[Adapter]:
    return [
        Adapter(
            name=PROVIDER,
            build_request=partial(chat.build, settings=settings),
            parse_usage=chat.parse_usage,
            is_context_overflow=chat.is_context_overflow,
            native_system=False,
            description="Ollama native chat (POST /api/chat)",
        )
    ]


#: The plugin: the adapter, Ollama model info (``name:tag`` or ``ollama/name``) with
#: ``[plugins.ollama.models]`` overrides, and a calibratable estimate, as local models'
#: tokenizers are not available offline; sending through the ``ollama`` SDK.
plugin = AdapterPlugin(
    provider=PROVIDER,
    settings_class=OllamaSettings,
    adapters=adapters,
    model_info=model_info,
    tokenizer=partial(CalibratedEstimate, chars_per_token=4.0, label="ollama-estimate"),
    transport=send.transport,
)

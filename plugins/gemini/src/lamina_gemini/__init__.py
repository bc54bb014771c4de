"""Lamina adapter for Google's Gemini API (``generateContent``): ``systemInstruction``,
user/model contents with function calls and responses, Gemini model limits, a calibrated
token estimate; with the ``sdk`` extra the adapter also sends (``send`` / ``asend``), and
``[plugins.gemini.summarizer]`` registers the ``gemini-llm`` summarizer.

``plugin`` is the object the ``lamina`` entry point names; the plumbing comes from the
kernel's adapter kit, ``lamina.adapters``.
"""

from __future__ import annotations

from functools import partial

from lamina import Adapter
from lamina.adapters import AdapterPlugin, CalibratedEstimate
from lamina_gemini import contents, send
from lamina_gemini.models import PROVIDER, model_info
from lamina_gemini.settings import GeminiSettings


def adapters(settings: GeminiSettings) -> list[Adapter]:
    return [
        Adapter(
            name=PROVIDER,
            build_request=partial(contents.build, settings=settings),
            parse_usage=contents.parse_usage,
            is_context_overflow=contents.is_context_overflow,
            description="Google Gemini (POST /v1beta/models/{model}:generateContent)",
        )
    ]


#: The plugin: the adapter, Gemini model info from models.dev with
#: ``[plugins.gemini.models]`` overrides, a calibratable estimate (no offline tokenizer), and
#: sending through the ``google-genai`` SDK.
plugin = AdapterPlugin(
    provider=PROVIDER,
    settings_class=GeminiSettings,
    adapters=adapters,
    model_info=model_info,
    tokenizer=partial(CalibratedEstimate, chars_per_token=4.0, label="gemini-estimate"),
    transport=send.transport,
)

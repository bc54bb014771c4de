"""Lamina plugin ``redaction``: masks secrets in everything assembled, before it reaches the
prompt. Active only when ``[plugins.redaction]`` is in the config; inert otherwise.

It wraps each assembly (``lamina_wrap_assembly``): the current event is masked before the
pipeline runs, so it is measured masked; system prompt, history and current message are masked
after, and the token usage is corrected by what changed.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Generator
from typing import Any

import attrs

import lamina
from lamina import AssembledContext, AssemblyCall, ConfigError, LaminaConfig, structure
from lamina_redaction.detectors import Redactor
from lamina_redaction.masking import mask_context
from lamina_redaction.settings import Settings

NAME = "redaction"


@lamina.hookimpl
def lamina_settings_class() -> type:
    return Settings


def redactor_for(config: LaminaConfig) -> Redactor | None:
    """The redactor ``config`` asks for, or ``None`` when it has no ``[plugins.redaction]``
    section (or ``enabled = false``)."""
    raw = config.sections.get(NAME)
    if raw is None:
        return None
    settings: Settings = structure(raw, Settings, file=config.path)
    if not settings.enabled:
        return None
    try:
        return settings.redactor()
    except ValueError as exc:
        raise ConfigError(
            str(exc), file=config.where, key=config.key(f"plugins.{NAME}.mask")
        ) from None


@lamina.hookimpl(wrapper=True)
def lamina_wrap_assembly(call: AssemblyCall) -> Generator[None, Any, AssembledContext]:
    redactor = redactor_for(call.assembler.config)
    if redactor is None:
        result: AssembledContext = yield
        return result
    event = call.request.event
    content, found = redactor.redact(event.content)
    if found:
        call.request = attrs.evolve(call.request, event=attrs.evolve(event, content=content))
    result = yield
    tokenizer = call.assembler.model(result.model).tokenizer
    return mask_context(result, redactor, tokenizer, Counter(found))

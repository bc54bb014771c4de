"""Lamina plugin ``redaction``: masks secrets in every block, history included, before the
kernel measures anything, so what is counted is what is sent. Active only when
``[plugins.redaction]`` is in the config: the settings class is marked
``inert_without_section``, so the kernel leaves the transform out otherwise."""

from __future__ import annotations

import lamina
from lamina import Block, BlockTransform, ConfigError, LaminaConfig, ProviderContext
from lamina_redaction.detectors import Redactor
from lamina_redaction.masking import mask_block
from lamina_redaction.settings import Settings

NAME = "redaction"


@lamina.hookimpl
def lamina_settings_class() -> type:
    return Settings


def redactor_for(config: LaminaConfig, settings: Settings | None) -> Redactor | None:
    """The redactor the settings ask for, or ``None`` with ``enabled = false`` (or no
    settings)."""
    if settings is None or not settings.enabled:
        return None
    try:
        return settings.redactor()
    except ValueError as exc:
        raise ConfigError(
            str(exc), file=config.where, key=config.key(f"plugins.{NAME}.mask")
        ) from None


@lamina.hookimpl
def lamina_block_transforms(
    config: LaminaConfig, settings: Settings | None
) -> list[BlockTransform]:
    redactor = redactor_for(config, settings)
    if redactor is None:
        return []

    def transform(block: Block, ctx: ProviderContext) -> Block:
        masked, found = mask_block(block, redactor)
        if found:
            kinds = ", ".join(f"{kind} ×{n}" for kind, n in sorted(found.items()))
            count = sum(found.values())
            ctx.warn(f"masked {count} secret{'' if count == 1 else 's'} in {block.id}: {kinds}")
        return masked

    return [BlockTransform(name=NAME, transform=transform, description="mask secrets")]

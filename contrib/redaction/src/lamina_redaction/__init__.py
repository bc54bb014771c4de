"""Lamina contrib bundle: masks secrets in the assembled context (see ``plugin``)."""

from lamina_redaction.detectors import BUILTIN_KINDS, Redactor
from lamina_redaction.settings import Settings

__all__ = ["BUILTIN_KINDS", "Redactor", "Settings"]

"""``[plugins.redaction]``: which detectors run, extra patterns and keys, allowed values, the mask."""

from __future__ import annotations

import re
import string
from typing import Any

import attrs

from lamina import inert_without_section
from lamina_redaction.detectors import (
    BUILTIN,
    BUILTIN_KINDS,
    Detector,
    Redactor,
    assignment_detector,
)


def _known_kinds(_inst: Any, attr: attrs.Attribute[Any], value: tuple[str, ...] | None) -> None:
    unknown = sorted(set(value or ()) - set(BUILTIN_KINDS))
    if unknown:
        raise ValueError(
            f"{attr.name}: unknown kind(s) {', '.join(unknown)}; known: {', '.join(BUILTIN_KINDS)}"
        )


def _regexes(_inst: Any, _attr: attrs.Attribute[Any], value: dict[str, str]) -> None:
    # Messages start with the field name: the kernel reports validator errors at the section.
    for name, pattern in value.items():
        if not re.fullmatch(r"[a-z0-9][a-z0-9-]*", name):
            raise ValueError(
                f"patterns: name {name!r} must be lowercase letters, digits and dashes"
            )
        try:
            compiled = re.compile(pattern)
        except re.error as exc:
            raise ValueError(
                f"patterns: {name!r} is not a valid regular expression: {exc}"
            ) from exc
        if compiled.fullmatch(""):
            raise ValueError(f"patterns: {name!r} matches the empty string")


def _mask(_inst: Any, _attr: attrs.Attribute[Any], value: str) -> None:
    fields = {f for _, f, _, _ in string.Formatter().parse(value) if f is not None}
    if fields - {"kind"}:
        raise ValueError(f"mask: {value!r} may only use the placeholder {{kind}}")


@inert_without_section
@attrs.frozen(kw_only=True)
class Settings:
    """The ``[plugins.redaction]`` section; its presence turns masking on."""

    enabled: bool = True
    kinds: tuple[str, ...] | None = attrs.field(default=None, validator=_known_kinds)
    disable: tuple[str, ...] = attrs.field(default=(), validator=_known_kinds)
    patterns: dict[str, str] = attrs.field(factory=dict, validator=_regexes)
    keys: tuple[str, ...] = ()
    allow: tuple[str, ...] = ()
    mask: str = attrs.field(default="[REDACTED:{kind}]", validator=_mask)

    def __attrs_post_init__(self) -> None:
        self.redactor()  # refuse a mask the detectors would take for a secret, at load

    def redactor(self) -> Redactor:
        """The redactor these settings describe (built-in detectors first, then ``patterns``)."""
        wanted = set(BUILTIN_KINDS if self.kinds is None else self.kinds) - set(self.disable)
        detectors: list[Detector] = [d for d in BUILTIN if d.kind in wanted]
        if "credential" in wanted:
            detectors.append(assignment_detector(self.keys))
        for name, pattern in self.patterns.items():
            compiled = re.compile(pattern)
            group = "secret" if "secret" in compiled.groupindex else None
            detectors.append(Detector(kind=name, pattern=compiled, group=group))
        redactor = Redactor(detectors=tuple(detectors), mask=self.mask, allow=frozenset(self.allow))
        for det in detectors:
            masked = self.mask.format(kind=det.kind)
            if redactor.find(masked):
                raise ValueError(f"mask: {masked!r} would itself be taken for a secret")
        return redactor

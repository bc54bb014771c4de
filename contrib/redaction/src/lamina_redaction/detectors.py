"""Secret detectors and the ``Redactor`` that masks what they find in one pass.

Every detector reports spans of the original text; overlapping finds are resolved by detector
order (the earlier, more specific one wins), so masking is one pass and never re-reads a mask.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence

import attrs

#: Key names whose value is a secret in ``KEY=value``, ``key: value`` and ``"key": "value"``.
SECRET_KEYS: tuple[str, ...] = (
    "password",
    "passwd",
    "pwd",
    "passphrase",
    "secret",
    "token",
    "api[_-]?key",
    "apikey",
    "access[_-]?key",
    "private[_-]?key",
    "auth[_-]?key",
    "credentials?",
)

# Values that are placeholders or code rather than secrets when they stand bare.
_NOT_A_VALUE = re.compile(
    r"(?i:none|null|nil|true|false|undefined|changeme-not-set)"
    r"|[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+"  # attribute access: settings.token, os.environ
)


@attrs.frozen(kw_only=True)
class Detector:
    """One kind of secret: a pattern, and the group holding the secret (whole match if none)."""

    kind: str
    pattern: re.Pattern[str]
    group: str | None = None

    def spans(self, text: str) -> Iterable[tuple[int, int]]:
        for m in self.pattern.finditer(text):
            if self.group is None:
                yield m.span()
            else:
                start, end = m.span(self.group)
                if start >= 0 and start < end:
                    yield start, end


def _c(pattern: str, flags: int = 0) -> re.Pattern[str]:
    return re.compile(pattern, flags)


def assignment_detector(extra_keys: Sequence[str] = ()) -> Detector:
    """``KEY=value`` / ``key: value`` / ``"key": "value"`` where the key ends in a secret word
    (``DB_PASSWORD``, ``github_token``, ``aws_secret_access_key``); only the value is masked."""
    words = "|".join((*SECRET_KEYS, *(re.escape(k) for k in extra_keys)))
    # A key is searched for from the start of its run of key characters only: a match from
    # inside the run is one from its start too, and retrying from each point of a run made a
    # megabyte of ``a.a.a`` cost the square of its length.
    return Detector(
        kind="credential",
        pattern=_c(
            rf"""(?<![A-Za-z0-9_.-])[A-Za-z0-9_.-]*?(?i:{words})["']?[ \t]*(?::=|=>|=|:)[ \t]*"""
            r"""(?:"(?P<dq>[^"\n]+)"|'(?P<sq>[^'\n]+)'|(?P<bare>[^\s"'`,;()\[\]{}<>]{4,}))"""
        ),
        group="value",
    )


#: The built-in detectors, most specific first.
BUILTIN: tuple[Detector, ...] = (
    Detector(
        kind="private-key",
        pattern=_c(
            r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY[A-Z ]*-----"
            r"(?:.*?-----END [A-Z0-9 ]*PRIVATE KEY[A-Z ]*-----|.*\Z)",
            re.S,
        ),
    ),
    Detector(kind="anthropic-key", pattern=_c(r"\bsk-ant-[A-Za-z0-9_-]{20,}")),
    Detector(kind="openai-key", pattern=_c(r"\bsk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{20,}")),
    Detector(kind="aws-access-key", pattern=_c(r"\b(?:AKIA|ASIA|ABIA|ACCA)[0-9A-Z]{16}\b")),
    Detector(
        kind="github-token",
        pattern=_c(r"\b(?:gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{22,})"),
    ),
    Detector(kind="gitlab-token", pattern=_c(r"\bglpat-[A-Za-z0-9_-]{20,}")),
    Detector(kind="slack-token", pattern=_c(r"\bxox[abposr]-[A-Za-z0-9-]{10,}")),
    Detector(kind="google-api-key", pattern=_c(r"\bAIza[0-9A-Za-z_-]{35}")),
    Detector(kind="stripe-key", pattern=_c(r"\b[rs]k_(?:live|test)_[0-9A-Za-z]{16,}")),
    Detector(
        kind="jwt",
        pattern=_c(r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"),
    ),
    Detector(
        kind="bearer-token",
        pattern=_c(r"(?i:\bbearer)[ \t]+(?P<secret>[A-Za-z0-9._~+/-]{16,}=*)"),
        group="secret",
    ),
    Detector(
        kind="url-password",
        # The scheme: from the start of its run of scheme characters, the first letter after
        # a word boundary, then the rest of the run, each looked at once (every later start in
        # the run reaches the same ``://``; retrying them was quadratic).
        pattern=_c(
            r"(?<![A-Za-z0-9+.-])(?>[A-Za-z0-9+.-]*?\b[A-Za-z])[A-Za-z0-9+.-]*+"
            r"://[^\s:/@]+:(?P<secret>[^\s/@]+)@"
        ),
        group="secret",
    ),
)

BUILTIN_KINDS: tuple[str, ...] = (*(d.kind for d in BUILTIN), "credential")


@attrs.frozen(kw_only=True)
class Redactor:
    """Masks every span the detectors find, except values listed in ``allow``."""

    detectors: tuple[Detector, ...]
    mask: str = "[REDACTED:{kind}]"
    allow: frozenset[str] = frozenset()

    def find(self, text: str) -> list[tuple[int, int, str]]:
        """Non-overlapping ``(start, end, kind)`` spans, in text order."""
        found: list[tuple[int, int, int, str]] = []
        for rank, det in enumerate(self.detectors):
            for start, end in self._spans(det, text):
                if text[start:end] not in self.allow:
                    found.append((start, rank, end, det.kind))
        found.sort(key=lambda f: (f[0], f[1], -f[2]))
        spans: list[tuple[int, int, str]] = []
        for start, _rank, end, kind in found:
            if spans and start < spans[-1][1]:
                continue
            spans.append((start, end, kind))
        return spans

    def _spans(self, det: Detector, text: str) -> Iterable[tuple[int, int]]:
        if det.group != "value":
            yield from det.spans(text)
            return
        for m in det.pattern.finditer(text):
            for name in ("dq", "sq", "bare"):
                start, end = m.span(name)
                if start < 0:
                    continue
                value = text[start:end]
                if name == "bare" and _NOT_A_VALUE.fullmatch(value):
                    break
                if start < end:
                    yield start, end
                break

    def redact(self, text: str) -> tuple[str, Counter[str]]:
        """``text`` with each secret replaced by the mask, and how many of each kind."""
        spans = self.find(text)
        if not spans:
            return text, Counter()
        out: list[str] = []
        last = 0
        for start, end, kind in spans:
            out.append(text[last:start])
            out.append(self.mask.format(kind=kind))
            last = end
        out.append(text[last:])
        return "".join(out), Counter(kind for _, _, kind in spans)

"""The detectors: each kind of secret is masked, ordinary text and code are not, settings
shape what runs, and masking is idempotent and leaves no secret behind."""

from __future__ import annotations

import re

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from lamina_redaction import BUILTIN_KINDS, Settings
from lamina_redaction.detectors import BUILTIN, SECRET_KEYS, Detector, Redactor

REDACT = Settings().redactor()

PEM = "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA7\nabc==\n-----END RSA PRIVATE KEY-----"

CASES = [
    (f"key:\n{PEM}\nafter", "key:\n[REDACTED:private-key]\nafter"),
    ("-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1r [… truncated]", "[REDACTED:private-key]"),
    ("use sk-ant-api03-AAAAAAAAAAAAAAAAAAAAAAAA now", "use [REDACTED:anthropic-key] now"),
    ("sk-proj-Zq8x0123456789abcdefghij", "[REDACTED:openai-key]"),
    ("id AKIAIOSFODNN7EXAMPLE.", "id [REDACTED:aws-access-key]."),
    ("ghp_" + "a1" * 18, "[REDACTED:github-token]"),
    ("github_pat_11ABCDEFG0123456789_abcdefghij", "[REDACTED:github-token]"),
    ("glpat-abcdefghij0123456789", "[REDACTED:gitlab-token]"),
    ("xoxb-1234567890-abcdef", "[REDACTED:slack-token]"),
    ("AIza" + "B" * 35, "[REDACTED:google-api-key]"),
    ("sk_live_0123456789abcdefXYZ", "[REDACTED:stripe-key]"),
    ("t=eyJhbGciOiJIUzI1.eyJzdWIiOiIxMjM0.SflKxwRJSMeKKF2QT4", "t=[REDACTED:jwt]"),
    ("Authorization: Bearer abcdef0123456789xyz", "Authorization: Bearer [REDACTED:bearer-token]"),
    ("postgres://app:s3cr3t-pw@db:5432/x", "postgres://app:[REDACTED:url-password]@db:5432/x"),
    ("DB_PASSWORD=hunter22", "DB_PASSWORD=[REDACTED:credential]"),
    ("export GITHUB_TOKEN='abc def ghi'", "export GITHUB_TOKEN='[REDACTED:credential]'"),
    ('{"api_key": "k-12345"}', '{"api_key": "[REDACTED:credential]"}'),
    ("password: correct horse", "password: [REDACTED:credential] horse"),
    (
        "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG",
        "aws_secret_access_key = [REDACTED:credential]",
    ),
    ("client_secret := xyz1234", "client_secret := [REDACTED:credential]"),
]


@pytest.mark.parametrize(("text", "expected"), CASES)
def test_each_kind_is_masked(text, expected):
    assert REDACT.redact(text)[0] == expected


@pytest.mark.parametrize(
    "text",
    [
        "max_tokens = 500",
        "token = settings.token",
        "secret = os.environ",
        "def f(token: str) -> int:",
        "n = tokenizer.count(text)",
        "The password policy requires twelve characters.",
        "task-0123456789abcdefghijklmnop",
        "password = None",
        "token: null",
        "passwords=",
        "see https://example.com/path?q=1",
        "AKIAshort",
    ],
)
def test_ordinary_text_and_code_are_left_alone(text):
    assert REDACT.redact(text) == (text, {})


def test_counts_by_kind():
    text = "DB_PASSWORD=hunter22 and AKIAIOSFODNN7EXAMPLE and AKIAIOSFODNN7EXAMPLF"
    assert dict(REDACT.redact(text)[1]) == {"credential": 1, "aws-access-key": 2}


def test_the_specific_kind_wins_over_credential():
    assert REDACT.redact("OPENAI_API_KEY=sk-proj-Zq8x0123456789abcdefghij")[0] == (
        "OPENAI_API_KEY=[REDACTED:openai-key]"
    )


def test_allow_keeps_listed_values():
    r = Settings(allow=("AKIAIOSFODNN7EXAMPLE",)).redactor()
    assert r.redact("AKIAIOSFODNN7EXAMPLE AKIAIOSFODNN7EXAMPLF")[0] == (
        "AKIAIOSFODNN7EXAMPLE [REDACTED:aws-access-key]"
    )


def test_kinds_and_disable_choose_detectors():
    only_aws = Settings(kinds=("aws-access-key",)).redactor()
    assert only_aws.redact("AKIAIOSFODNN7EXAMPLE pwd=hunter22")[0] == (
        "[REDACTED:aws-access-key] pwd=hunter22"
    )
    no_cred = Settings(disable=("credential",)).redactor()
    assert no_cred.redact("pwd=hunter22")[0] == "pwd=hunter22"


def test_extra_patterns_keys_and_mask():
    r = Settings(
        patterns={"ticket": r"TKT-\d{6}", "pin": r"PIN (?P<secret>\d{4})"},
        keys=("passcode",),
        mask="<{kind}>",
    ).redactor()
    assert (
        r.redact("TKT-123456 PIN 1234 passcode=98765")[0]
        == "<ticket> PIN <pin> passcode=<credential>"
    )


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"kinds": ["aws"]}, "unknown kind"),
        ({"disable": ["nope"]}, "unknown kind"),
        ({"patterns": {"x": "("}}, "not a valid regular expression"),
        ({"patterns": {"x": "a*"}}, "matches the empty string"),
        ({"patterns": {"Bad Name": "x"}}, "lowercase"),
        ({"mask": "{kind}{secret}"}, "only use the placeholder"),
    ],
)
def test_bad_settings_are_refused(settings, message):
    from lamina import SerdeError, structure

    with pytest.raises(SerdeError, match=message):
        structure(settings, Settings, file="lamina.toml")


def test_a_mask_that_looks_like_a_secret_is_refused():
    with pytest.raises(ValueError, match="would itself be taken for a secret"):
        Settings(mask="password=hunter22-{kind}").redactor()


# -- invariants --------------------------------------------------------------------------------

FILLER = st.text(st.sampled_from("abc XYZ 019=:_-\n\"'./"), max_size=40)
SECRETS = st.one_of(
    st.text(st.sampled_from("ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"), min_size=16, max_size=16).map(
        lambda s: "AKIA" + s
    ),
    st.text(st.sampled_from("abcdefghijklmnopqrstuvwxyz0123456789"), min_size=36, max_size=40).map(
        lambda s: "ghp_" + s
    ),
    st.text(st.sampled_from("abcdefghijKLMNOP0123456789"), min_size=20, max_size=30).map(
        lambda s: "sk-proj-" + s
    ),
)


@given(st.lists(st.tuples(FILLER, SECRETS), max_size=4), FILLER)
def test_no_secret_survives_and_masking_is_idempotent(pairs, tail):
    text = "".join(f"{filler} {secret} " for filler, secret in pairs) + tail
    masked, found = REDACT.redact(text)
    for _, secret in pairs:
        assert secret not in masked
    assert sum(found.values()) >= len(pairs)
    assert REDACT.redact(masked)[0] == masked


def test_every_builtin_kind_is_covered_by_a_case():
    covered = {kind for _, expected in CASES for kind in BUILTIN_KINDS if f":{kind}]" in expected}
    assert covered == set(BUILTIN_KINDS)


# -- runs of key and scheme characters: looked at once ------------------------------------------


def _as_first_written() -> Redactor:
    """The built-in redactor with its two patterns as first written: searched from every
    point of a run of key or scheme characters (quadratic in the run)."""
    words = "|".join(SECRET_KEYS)
    credential = Detector(
        kind="credential",
        pattern=re.compile(
            rf"""(?<![A-Za-z0-9])[A-Za-z0-9_.-]*?(?i:{words})["']?[ \t]*(?::=|=>|=|:)[ \t]*"""
            r"""(?:"(?P<dq>[^"\n]+)"|'(?P<sq>[^'\n]+)'|(?P<bare>[^\s"'`,;()\[\]{}<>]{4,}))"""
        ),
        group="value",
    )
    url = Detector(
        kind="url-password",
        pattern=re.compile(r"\b[A-Za-z][A-Za-z0-9+.-]*://[^\s:/@]+:(?P<secret>[^\s/@]+)@"),
        group="secret",
    )
    detectors = tuple(url if d.kind == "url-password" else d for d in BUILTIN)
    return attrs.evolve(REDACT, detectors=(*detectors, credential))


# Runs of key and scheme characters, each followed by what may end a key or a scheme.
RUNS = st.lists(
    st.tuples(
        st.text(st.sampled_from("aZ1_.-+"), max_size=8),
        st.sampled_from(
            [
                "://u:pw@h",
                "://x@y",
                "token=abcd1",
                "_PASSWORD='s3cr3t'",
                "api-key: hunter22",
                "secret:=xyzw1",
                "Bearer ",
                ":",
                "=",
                " ",
                "\n",
                "",
                '"',
            ]
        ),
    ),
    max_size=8,
).map(lambda runs: "".join(run + end for run, end in runs))


@settings(max_examples=500, deadline=None)
@given(RUNS)
def test_runs_are_searched_once_with_the_same_finds(text):
    assert REDACT.find(text) == _as_first_written().find(text)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("text", ["a." * 500_000, "a-" * 500_000, "a.a+" * 250_000 + "://u:p@h"])
def test_a_megabyte_of_key_characters_is_searched_in_linear_time(text):
    """Minified code, a long dotted name: hours before, a run at a time now."""
    assert [kind for *_, kind in REDACT.find(text)] == (["url-password"] if "@" in text else [])

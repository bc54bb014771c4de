"""working-set.yml: the schema, and errors that name the line and the key."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from lamina_workspace.manifest import (
    Budget,
    FileEntry,
    ManifestError,
    load_document,
    parse_manifest,
    read_manifest,
)

from lamina import ConfigError

PROTOCOL_MANIFEST = """\
# working-set.yml
protocol: CONTEXT-ASSEMBLY/0.1
budget:
  max_tokens: 28000
  reserved_for_response: 4000
  effective: 24000

files:
  - path: ".agent/constitution.md"
    priority: 1.0          # Highest (always included)
    role: "system"
    truncate_strategy: "never"

  - path: "current_task.md"
    priority: 0.95
    role: "developer"
    truncate_strategy: "end"

  - path: "src/main.ts"
    priority: 0.8
    role: "context"
    truncate_strategy: "middle"
    max_lines: 500

  - path: "tool/terminal/log-latest.txt"
    priority: 0.3
    role: "context"
    truncate_strategy: "start"  # Keep recent

metadata:
  last_updated: "2025-12-30T12:30:00Z"
  assembled_by: "model"
"""


def parse(text: str):  # type: ignore[no-untyped-def]
    return parse_manifest(load_document(text, "working-set.yml"), "working-set.yml")


def test_the_protocols_example_manifest_parses():
    m = parse(PROTOCOL_MANIFEST)
    assert m.protocol == "CONTEXT-ASSEMBLY/0.1"
    assert m.budget == Budget(max_tokens=28000, reserved_for_response=4000, effective=24000)
    assert [(f.path, f.priority, f.role, f.truncate_strategy, f.max_lines) for f in m.files] == [
        (".agent/constitution.md", 1.0, "system", "never", None),
        ("current_task.md", 0.95, "developer", "end", None),
        ("src/main.ts", 0.8, "context", "middle", 500),
        ("tool/terminal/log-latest.txt", 0.3, "context", "start", None),
    ]
    assert m.files[2].line == 19
    assert m.metadata["assembled_by"] == "model"


def test_defaults_and_effective_from_max_minus_reserve():
    m = parse("budget:\n  max_tokens: 1000\n  reserved_for_response: 200\nfiles:\n  - path: a.md\n")
    assert m.budget is not None and m.budget.effective == 800
    assert m.files == (
        FileEntry(path="a.md", priority=0.5, role="context", truncate_strategy="end", line=5),
    )


def test_out_of_range_priority_names_line_and_key():
    text = PROTOCOL_MANIFEST.replace("priority: 0.8", "priority: 1.5")
    with pytest.raises(ManifestError) as info:
        parse(text)
    assert str(info.value) == (
        "working-set.yml:20, key files[2].priority: expected a number within 0.0..1.0, got 1.5"
    )
    assert info.value.line == 20
    assert isinstance(info.value, ConfigError)


@pytest.mark.parametrize(
    ("change", "line", "key", "message"),
    [
        (('role: "developer"', 'role: "assistant"'), 16, "files[1].role", "expected one of"),
        (
            ('truncate_strategy: "start"', 'truncate_strategy: "tail"'),
            28,
            "files[3].truncate_strategy",
            "expected one of never, start, middle, end",
        ),
        (("max_lines: 500", "max_lines: -3"), 23, "files[2].max_lines", "expected an integer > 0"),
        (("    max_lines: 500", "    maxlines: 500"), 23, "files[2].maxlines", "unknown key"),
        (("effective: 24000", "effective: 25000"), 6, "budget.effective", "exceeds"),
        (
            ("protocol: CONTEXT-ASSEMBLY/0.1", "protocol: CONTEXT-ASSEMBLY/2.0"),
            2,
            "protocol",
            "unsupported",
        ),
        (
            ('assembled_by: "model"', 'assembled_by: "robot"'),
            32,
            "metadata.assembled_by",
            "expected one of",
        ),
        (('"src/main.ts"', '"current_task.md"'), 19, "files[2].path", "listed twice"),
        (("priority: 0.95", "priority: true"), 15, "files[1].priority", "within 0.0..1.0"),
    ],
)
def test_schema_errors_name_line_and_key(change, line, key, message):
    old, new = change
    assert old in PROTOCOL_MANIFEST
    with pytest.raises(ManifestError) as info:
        parse(PROTOCOL_MANIFEST.replace(old, new, 1))
    assert info.value.line == line
    assert info.value.key == key
    assert message in str(info.value)
    assert str(info.value).startswith(f"working-set.yml:{line}, key {key}: ")


def test_missing_path_and_unknown_top_level_key():
    with pytest.raises(ManifestError, match=r"working-set.yml:2, key files\[0\]\.path: required"):
        parse("files:\n  - priority: 0.5\n")
    with pytest.raises(ManifestError, match=r"working-set.yml:1, key budgett: unknown key"):
        parse("budgett: {}\n")


def test_yaml_syntax_error_names_the_line():
    with pytest.raises(ManifestError) as info:
        parse("files:\n  - path: a.md\n    priority: [0.5\n")
    assert str(info.value).startswith("working-set.yml:")
    assert "not valid YAML" in str(info.value)
    assert info.value.line is not None and info.value.line >= 3


def test_duplicate_yaml_keys_are_an_error():
    with pytest.raises(ManifestError, match="not valid YAML"):
        parse("files:\n  - path: a.md\n    path: b.md\n")


def test_missing_manifest_file(tmp_path: Path):
    with pytest.raises(ManifestError, match=r"ws\.yml: working-set manifest not found"):
        read_manifest(tmp_path, "ws.yml")


@given(st.floats(allow_nan=False, allow_infinity=False))
def test_priority_is_accepted_exactly_within_the_unit_interval(p: float):
    text = f"files:\n  - path: a.md\n    priority: {p!r}\n"
    if 0.0 <= p <= 1.0:
        assert parse(text).files[0].priority == p
    else:
        with pytest.raises(ManifestError, match=r"files\[0\]\.priority"):
            parse(text)

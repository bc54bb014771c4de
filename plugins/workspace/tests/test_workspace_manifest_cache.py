"""The manifest's cache (``lamina_workspace.manifest_cache``): unchanged text is read back as
the very manifest parsing gives, without ruamel; changed text, an invalid manifest, a damaged
or unwritable cache all mean parsing, as before."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from lamina_workspace import manifest, manifest_cache
from lamina_workspace.manifest import ManifestError, load_document, parse_manifest, read_manifest

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "workspace"
TEXT = """\
protocol: CONTEXT-ASSEMBLY/0.1
budget:
  max_tokens: 1000
  reserved_for_response: 200
files:
  - path: "a.md"   # quoted
    priority: 1.0
    role: 'system'
  - path: b.md
    max_lines: 40
metadata:
  assembled_by: model
  note: {nested: [1, 2.5, true, null, "x"]}
"""


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("LAMINA_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


def parsed(text: str, path: str = "working-set.yml") -> manifest.Manifest:
    return parse_manifest(load_document(text, path), path)


def no_parsing(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(text: str, source: str) -> Any:
        raise AssertionError("parsed although the cache holds it")

    monkeypatch.setattr(manifest, "load_document", refuse)


def cache_files(cache: Path) -> list[Path]:
    return [p for p in [cache / "workspace" / "manifests.json"] if p.exists()]


def kept(cache: Path) -> dict[str, Any]:
    (file,) = cache_files(cache)
    entries: dict[str, Any] = json.loads(file.read_text())["entries"]
    return entries


def test_unchanged_text_is_read_back_without_parsing(tmp_path, cache, monkeypatch):
    (tmp_path / "working-set.yml").write_text(TEXT)
    first = read_manifest(tmp_path, "working-set.yml")
    assert first == parsed(TEXT)
    assert type(first.files[0].path) is str and type(first.metadata["note"]) is dict
    no_parsing(monkeypatch)
    again = read_manifest(tmp_path, "working-set.yml")
    assert again == first and again.files[1].line == first.files[1].line == 9


def test_changed_text_is_parsed_at_once(tmp_path, cache, monkeypatch):
    path = tmp_path / "working-set.yml"
    path.write_text(TEXT)
    read_manifest(tmp_path, "working-set.yml")
    changed = TEXT.replace("max_lines: 40", "max_lines: 41")
    path.write_text(changed)
    assert read_manifest(tmp_path, "working-set.yml").files[1].max_lines == 41
    assert len(kept(cache)) == 1  # one entry per manifest, written again


def test_the_last_manifests_read_are_kept(tmp_path, cache, monkeypatch):
    roots = [tmp_path / f"ws{n}" for n in range(manifest_cache.KEPT + 3)]
    for root in roots:
        root.mkdir()
        (root / "working-set.yml").write_text(TEXT)
        read_manifest(root, "working-set.yml")
    assert len(kept(cache)) == manifest_cache.KEPT
    no_parsing(monkeypatch)
    for root in roots[3:]:
        assert read_manifest(root, "working-set.yml") == parsed(TEXT)


def test_a_new_reader_is_a_miss(tmp_path, cache, monkeypatch):
    (tmp_path / "working-set.yml").write_text(TEXT)
    read_manifest(tmp_path, "working-set.yml")
    before = manifest_cache.key(TEXT, "working-set.yml")
    monkeypatch.setattr(manifest_cache, "_readers", lambda: "another reader")
    assert manifest_cache.key(TEXT, "working-set.yml") != before


def test_an_invalid_manifest_is_never_kept(tmp_path, cache):
    (tmp_path / "working-set.yml").write_text("files:\n  - path: a.md\n    priority: 2\n")
    for _ in range(2):
        with pytest.raises(ManifestError, match=r"working-set\.yml:3, key files\[0\]\.priority"):
            read_manifest(tmp_path, "working-set.yml")
    assert cache_files(cache) == []


def test_values_json_would_change_are_not_kept(tmp_path, cache):
    """A date in the metadata stays ruamel's, and the manifest is parsed every time."""
    text = "files:\n  - path: a.md\nmetadata:\n  when: 2026-01-14\n  hex: 0x10\n"
    (tmp_path / "working-set.yml").write_text(text)
    m = read_manifest(tmp_path, "working-set.yml")
    assert str(m.metadata["when"]) == "2026-01-14" and m.metadata["hex"] == 16
    assert cache_files(cache) == []


@pytest.mark.parametrize(
    "damage",
    [b"", b"{", b"[]", b'{"key": 1}', b"null", b'{"format": 1, "entries": {"x": 1, "y": []}}'],
)
def test_a_damaged_cache_is_ignored_and_written_again(tmp_path, cache, damage):
    (tmp_path / "working-set.yml").write_text(TEXT)
    want = read_manifest(tmp_path, "working-set.yml")
    (file,) = cache_files(cache)
    kept = file.read_bytes()
    file.write_bytes(damage)
    assert read_manifest(tmp_path, "working-set.yml") == want
    assert file.read_bytes() == kept


def test_a_forged_entry_under_the_right_key_is_refused(tmp_path, cache):
    (tmp_path / "working-set.yml").write_text(TEXT)
    want = read_manifest(tmp_path, "working-set.yml")
    (file,) = cache_files(cache)
    data = json.loads(file.read_text())
    (entry,) = data["entries"].values()
    entry["manifest"]["files"][0][0] = 7
    file.write_text(json.dumps(data))
    assert read_manifest(tmp_path, "working-set.yml") == want


def test_without_a_writable_cache_every_read_parses(tmp_path, monkeypatch):
    (tmp_path / "working-set.yml").write_text(TEXT)
    blocker = tmp_path / "file"
    blocker.write_text("where the cache folder would be")
    for root in (str(blocker), ""):
        monkeypatch.setenv("LAMINA_CACHE_DIR", root)
        assert read_manifest(tmp_path, "working-set.yml") == parsed(TEXT)
        assert read_manifest(tmp_path, "working-set.yml") == parsed(TEXT)


words = st.text(alphabet="abcdefghij_/.-", min_size=1, max_size=12).filter(
    lambda s: s.strip() and s[0] not in "-." and s not in ("null", "true", "false")
)
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(10**20), 10**20),
    st.floats(allow_nan=False, allow_infinity=False),
    words,
)


def _yaml_scalar(value: Any) -> str:
    return json.dumps(value)  # JSON's scalars are YAML's too


@st.composite
def manifests(draw: st.DrawFn) -> str:
    lines = ["protocol: CONTEXT-ASSEMBLY/0.1"]
    if draw(st.booleans()):
        top = draw(st.integers(2, 10**6))
        lines += ["budget:", f"  max_tokens: {top}"]
        lines.append(f"  reserved_for_response: {draw(st.integers(0, top - 1))}")
    lines.append("files:")
    paths = draw(st.lists(words, min_size=0, max_size=5, unique=True))
    for path in paths:
        quote = draw(st.sampled_from(['"{}"', "'{}'", "{}"]))
        lines.append(f"  - path: {quote.format(path)}")
        if draw(st.booleans()):
            lines.append(f"    priority: {draw(st.floats(0.0, 1.0))!r}")
        if draw(st.booleans()):
            lines.append(f"    role: {draw(st.sampled_from(manifest.ROLES))}")
        if draw(st.booleans()):
            lines.append(f"    max_lines: {draw(st.integers(1, 10**6))}")
        if draw(st.booleans()):
            lines.append("    # a comment")
    meta = draw(st.dictionaries(words, scalars, max_size=4))
    if meta:
        lines.append("metadata:")
        lines += [f"  {json.dumps(k)}: {_yaml_scalar(v)}" for k, v in meta.items()]
    return "\n".join(lines) + "\n"


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(text=manifests())
def test_read_back_equals_parsing_for_any_manifest(tmp_path, cache, text):
    (tmp_path / "working-set.yml").write_text(text)
    first = read_manifest(tmp_path, "working-set.yml")  # parsed (or kept by an earlier example)
    again = read_manifest(tmp_path, "working-set.yml")  # read back
    want = parsed(text)
    assert first == want and again == want
    for a, b in zip(again.files, want.files, strict=True):
        assert [type(getattr(a, f)) for f in ("path", "priority", "role", "max_lines", "line")] == [
            type(getattr(b, f)) for f in ("path", "priority", "role", "max_lines", "line")
        ]
    assert json.dumps(again.metadata, sort_keys=True) == json.dumps(want.metadata, sort_keys=True)


def test_assemble_on_the_example_does_not_import_ruamel_once_kept(tmp_path):
    code = (
        "import io, sys, contextlib; from lamina import cli\n"
        "sys.argv = ['lamina', 'assemble', '--config', sys.argv[1], '--format', 'text',\n"
        "            '--message', 'hello', '--time', '2026-03-01T09:00:00+00:00']\n"
        "out = io.StringIO()\n"
        "with contextlib.redirect_stdout(out):\n"
        "  try:\n    cli.main()\n  except SystemExit as exc:\n    assert not exc.code, exc.code\n"
        "print(out.getvalue())\n"
        "print('RUAMEL', 'ruamel.yaml' in sys.modules)"
    )
    copy = tmp_path / "workspace"
    shutil.copytree(EXAMPLE, copy, ignore=shutil.ignore_patterns("ledger.db*"))
    env = {**os.environ, "LAMINA_CACHE_DIR": str(tmp_path / "cache"), "LAMINA_PLUGINS": "workspace"}
    runs = [
        subprocess.run(
            [sys.executable, "-c", code, str(copy / "lamina.toml")],
            capture_output=True,
            text=True,
            timeout=120,
            env=env,
        )
        for _ in range(2)
    ]
    assert "RUAMEL True" in runs[0].stdout, runs[0].stdout + runs[0].stderr
    assert "RUAMEL False" in runs[1].stdout, runs[1].stdout + runs[1].stderr
    assert runs[0].stdout.replace("RUAMEL True", "") == runs[1].stdout.replace("RUAMEL False", "")

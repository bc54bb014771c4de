"""Workspace files are opened beneath the root: no symlink at any component, no race between a
check and an open, no FIFO or device read, and a refusal (never a traceback or a hang) for a
loop, a vanished file or anything else that cannot be read."""

from __future__ import annotations

import json
import os
import re
import stat
import threading
from pathlib import Path

import pytest
from lamina_workspace.beneath import MAX_HOPS, FileRefused, open_regular
from lamina_workspace.files import read_text
from lamina_workspace.manifest import load_document, parse_manifest
from lamina_workspace.working_set import build_working_set

CANARY = "CANARY-OUTSIDE-THE-WORKSPACE"
#: Working sets read while the folder flips (before the fix about 4% read the outside file).
ROUNDS = 1000


def manifest_for(*paths: str):  # type: ignore[no-untyped-def]
    text = "files:\n" + "".join(f"  - path: {json.dumps(p)}\n" for p in paths)
    return parse_manifest(load_document(text, "ws.yml"), "ws.yml")


def build(root: Path, *paths: str):  # type: ignore[no-untyped-def]
    return build_working_set(
        manifest_for(*paths), manifest_path="ws.yml", root=root, max_bytes=100_000, plugin="ws"
    )


def reasons(ws) -> dict[str, str]:  # type: ignore[no-untyped-def]
    return {ex.entry.path: ex.reason for ex in ws.excluded}


def test_swapping_a_directory_for_a_symlink_never_reads_outside(tmp_path: Path):
    """A thread flips ``sub`` between a real folder and a symlink to a folder outside the root
    (atomic renames) while the working set is read: no byte of the outside file may reach a
    block, and nothing may be raised; a read in the middle of a swap is a refusal."""
    root, outside = tmp_path / "ws", tmp_path / "outside"
    (root / "sub").mkdir(parents=True)
    outside.mkdir()
    (root / "sub" / "file.txt").write_text("inside content\n")
    (outside / "file.txt").write_text(CANARY + "\n")
    (root / "sub_link").symlink_to(outside)
    stop = threading.Event()

    def flip() -> None:
        sub, real, link = root / "sub", root / "sub_real", root / "sub_link"
        while not stop.is_set():
            os.rename(sub, real)
            os.rename(link, sub)
            os.rename(sub, link)
            os.rename(real, sub)

    flipper = threading.Thread(target=flip)
    flipper.start()
    inside = refused = 0
    try:
        for _ in range(ROUNDS):
            ws = build(root, "sub/file.txt")  # an exception here fails the test
            assert not any(CANARY in b.body for b in ws.blocks)
            inside += len(ws.blocks)
            refused += len(ws.excluded)
            for reason in reasons(ws).values():
                assert reason == "no such file" or reason.startswith(
                    ("resolves outside the workspace root", "symlink loop")
                ), reason
    finally:
        stop.set()
        flipper.join()
    assert inside + refused == ROUNDS
    assert inside and refused  # both sides of the swap were seen: the race was run


def test_an_intermediate_symlink_leading_out_is_refused(tmp_path: Path):
    root, outside = tmp_path / "ws", tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    (outside / "file.txt").write_text(CANARY)
    (root / "sub").symlink_to(outside)
    with pytest.raises(FileRefused, match="resolves outside the workspace root"):
        read_text(root, "sub/file.txt")


@pytest.mark.parametrize(
    ("link", "target"),
    [
        ("docs", "real"),  # relative, to a folder
        ("docs", "./real/../real"),  # relative, up and down again, still inside
        ("docs", "ABSOLUTE/real"),  # absolute, pointing back inside the root
    ],
)
def test_symlinks_that_stay_inside_are_followed(tmp_path: Path, link: str, target: str):
    root = tmp_path / "ws"
    (root / "real").mkdir(parents=True)
    (root / "real" / "a.md").write_text("inside\n")
    (root / link).symlink_to(target.replace("ABSOLUTE", str(root)))
    assert read_text(root, "docs/a.md").text == "inside\n"


def test_a_relative_symlink_climbing_out_is_refused(tmp_path: Path):
    root = tmp_path / "ws"
    root.mkdir()
    (tmp_path / "secret.md").write_text(CANARY)
    (root / "a.md").symlink_to("../secret.md")
    with pytest.raises(FileRefused, match="resolves outside the workspace root"):
        read_text(root, "a.md")


def test_a_symlink_loop_is_a_refusal(tmp_path: Path):
    root = tmp_path / "ws"
    root.mkdir()
    (root / "a").symlink_to("b")
    (root / "b").symlink_to("a")
    (root / "self").symlink_to("self/x")
    ws = build(root, "a", "self/y")
    assert ws.blocks == ()
    assert all(r.startswith("symlink loop") for r in reasons(ws).values()), reasons(ws)
    assert MAX_HOPS >= 8


def test_a_fifo_is_refused_without_blocking(tmp_path: Path):
    root = tmp_path / "ws"
    root.mkdir()
    os.mkfifo(root / "pipe")
    ws = build(root, "pipe")
    assert reasons(ws) == {"pipe": "not a regular file (a FIFO)"}


def test_a_device_file_is_refused_without_being_opened(tmp_path: Path):
    root = tmp_path / "ws"
    root.mkdir()
    try:
        os.mknod(root / "zero", stat.S_IFCHR | 0o600, os.makedev(1, 5))
    except PermissionError:
        pytest.skip("creating a device file needs privileges")
    assert reasons(build(root, "zero")) == {"zero": "not a regular file (a character device)"}


@pytest.mark.parametrize(
    ("make", "path", "reason"),
    [
        (lambda r: (r / "d").mkdir(), "d", "not a regular file (a directory)"),
        (lambda r: (r / "f").write_text("x"), "f/g.md", "f is a file, not a folder"),
        (lambda r: None, "gone/x.md", "no such file"),
        (lambda r: None, "x.md", "no such file"),
    ],
)
def test_what_cannot_be_read_is_a_refusal(tmp_path: Path, make, path, reason):  # type: ignore
    root = tmp_path / "ws"
    root.mkdir()
    make(root)
    assert reasons(build(root, path)) == {path: reason}


def test_a_file_that_vanishes_mid_read_is_read_as_opened_or_refused(tmp_path: Path):
    """Once opened, the descriptor is what is read: unlinking or truncating the file then
    cannot raise, and a missing file is a refusal."""
    root = tmp_path / "ws"
    root.mkdir()
    (root / "a.md").write_text("hello\n" * 100)
    fd, st = open_regular(root, "a.md")
    os.unlink(root / "a.md")
    os.close(fd)
    assert reasons(build(root, "a.md")) == {"a.md": "no such file"}
    (root / "b.md").write_text("x" * 10_000)
    fd, st = open_regular(root, "b.md")
    os.truncate(root / "b.md", 10)
    from lamina_workspace.files import read_open

    got = read_open(fd, st.st_size, shown="b.md", strategy="middle", max_bytes=1000)
    assert got.partial and "x" * 10 in got.text


def test_a_missing_root_is_a_refusal(tmp_path: Path):
    assert reasons(build(tmp_path / "absent", "a.md")) == {"a.md": "no such file"}


@pytest.mark.parametrize(
    ("make", "reason"),
    [
        (lambda p: os.mkfifo(p), "not a regular file (a FIFO)"),
        (lambda p: p.symlink_to(p.name), "symlink loop"),
        (lambda p: p.mkdir(), "not a regular file (a directory)"),
    ],
)
def test_a_system_prompt_source_that_cannot_be_read_is_a_config_error(
    workspace, assembler, config_for, make, reason
):  # type: ignore[no-untyped-def]
    from lamina import ConfigError

    (workspace / "AGENTS.md").unlink()
    make(workspace / "AGENTS.md")
    a = assembler(config_for(workspace))
    expected = (
        f"key plugins.workspace.agents: required workspace file AGENTS.md .*: {re.escape(reason)}"
    )
    with pytest.raises(ConfigError, match=expected):
        a.assemble(a.request("x"))


def test_updates_never_write_through_a_symlink_leading_out(tmp_path: Path):
    """The change log's folder swapped for a symlink to somewhere else: the update is refused
    (before the manifest is replaced) and nothing is written outside the root."""
    from lamina_workspace.updates import UpdateError, apply_updates
    from lamina_workspace.where import Workspace

    root, outside = tmp_path / "ws", tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    (root / "working-set.yml").write_text("files:\n  - path: a.md\n")
    (root / "a.md").write_text("a\n")
    (root / ".lamina").symlink_to(outside)
    ws = Workspace(root=root, manifest="working-set.yml", log=".lamina/log.jsonl")
    action = {"action": "adjust_priority", "path": "a.md", "priority": 0.9, "why": "x"}
    with pytest.raises(UpdateError, match="resolves outside the workspace root"):
        apply_updates(ws, [action])
    assert list(outside.iterdir()) == []


def test_the_manifest_is_replaced_where_an_inside_symlink_leads(tmp_path: Path):
    from lamina_workspace.updates import apply_updates
    from lamina_workspace.where import Workspace

    root = tmp_path / "ws"
    (root / "conf").mkdir(parents=True)
    (root / "conf" / "ws.yml").write_text("files:\n  - path: a.md\n")
    (root / "working-set.yml").symlink_to("conf/ws.yml")
    (root / "a.md").write_text("a\n")
    ws = Workspace(root=root, manifest="working-set.yml")
    apply_updates(ws, [{"action": "adjust_priority", "path": "a.md", "priority": 0.9, "why": "x"}])
    assert (root / "working-set.yml").is_symlink()
    assert "priority: 0.9" in (root / "conf" / "ws.yml").read_text()


@pytest.mark.parametrize("path", ["a\nb.md", "a\rb.md", "a\u2028b.md", "a\x1bb.md"])
def test_paths_with_line_breaks_or_control_characters_are_refused(tmp_path: Path, path: str):
    from lamina_workspace.updates import UpdateError, apply_updates
    from lamina_workspace.where import Workspace

    root = tmp_path / "ws"
    root.mkdir()
    (root / path).write_text("x\n")
    (root / "working-set.yml").write_text("files: []\n")
    ws = Workspace(root=root, manifest="working-set.yml")
    with pytest.raises(UpdateError, match="control characters and line breaks are refused"):
        apply_updates(ws, [{"action": "add_to_working_set", "path": path, "why": "x"}])
    assert reasons(build(root, path)) == {
        path: "control characters and line breaks are refused in paths"
    }


def test_a_path_with_a_lone_surrogate_is_refused(tmp_path: Path):
    """YAML escapes can name a path no file system can hold: a refusal, not a crash."""
    root = tmp_path / "ws"
    root.mkdir()
    manifest = parse_manifest(load_document('files:\n  - path: "a\\ud800.md"\n', "w"), "w")
    ws = build_working_set(manifest, manifest_path="w", root=root, max_bytes=100, plugin="ws")
    assert reasons(ws) == {"a\ud800.md": "not valid text (it holds a lone surrogate)"}

"""Turn a working-set manifest into blocks: each file read safely, tagged with its role in the
working-set protocol, ordered by priority; files that may not be read are kept aside with the
reason.

Role ``system`` files go to the ``working_set_system`` layer (system prompt, cached); every
other role goes to ``working_set`` (the current event, never cached), so a working set that
changes turn by turn does not break the cached prefix.
"""

from __future__ import annotations

from pathlib import Path

from attrs import field, frozen

from lamina import Block, Provenance, plural
from lamina_workspace.beneath import FileRefused
from lamina_workspace.files import FileText, read_text
from lamina_workspace.manifest import FileEntry, Manifest

LAYER = "working_set"
SYSTEM_LAYER = "working_set_system"


def block_id(path: str) -> str:
    return f"working-set:{path}"


def layer_for(entry: FileEntry) -> str:
    return SYSTEM_LAYER if entry.role == "system" else LAYER


@frozen(kw_only=True)
class Excluded:
    """A listed file left out before fitting, and why."""

    entry: FileEntry
    reason: str


@frozen(kw_only=True)
class Partial:
    """A file read only in part (large file or max_lines): ``by`` names the rule that cut it
    (``max_lines``, or the file's truncate strategy when only part of a large file was read);
    ``uncut`` is the text before ``max_lines`` cut it, ``scale`` the file's size over the
    bytes read (above 1 when part of the file was never read)."""

    entry: FileEntry
    note: str
    by: str
    uncut: str
    scale: float = 1.0


@frozen(kw_only=True)
class WorkingSet:
    """The manifest's blocks (priority order), the files refused, and what was read in part."""

    manifest: Manifest
    manifest_path: str
    blocks: tuple[Block, ...] = ()
    excluded: tuple[Excluded, ...] = ()
    partial: tuple[Partial, ...] = ()
    hashes: dict[str, str] = field(factory=dict)
    #: What the turn loop's rules could not do this turn, for the report.
    warnings: tuple[str, ...] = ()


def ordered(files: tuple[FileEntry, ...]) -> list[FileEntry]:
    """Highest priority first; ties keep manifest order (the working-set protocol's sort)."""
    return [f for _, f in sorted(enumerate(files), key=lambda p: (-p[1].priority, p[0]))]


def build_working_set(
    manifest: Manifest,
    *,
    manifest_path: str,
    root: Path,
    max_bytes: int,
    plugin: str,
) -> WorkingSet:
    """Read every listed file (at most ``max_bytes`` each) into a block; refusals are kept
    with their reason rather than failing the assembly."""
    blocks: list[Block] = []
    excluded: list[Excluded] = []
    partial: list[Partial] = []
    hashes: dict[str, str] = {}
    for entry in ordered(manifest.files):
        try:
            read: FileText = read_text(
                root,
                entry.path,
                strategy=entry.truncate_strategy,
                max_bytes=max_bytes,
                max_lines=entry.max_lines,
            )
        except FileRefused as exc:
            excluded.append(Excluded(entry=entry, reason=exc.reason))
            continue
        notes = []
        if read.partial:
            notes.append(f"only part of its {read.size} bytes read ({entry.truncate_strategy})")
        if read.lines_omitted:
            omitted = read.lines_omitted
            notes.append(
                f"{omitted} {plural(omitted, 'line')} over max_lines {entry.max_lines} cut"
            )
        note = "; ".join(notes) or None
        if note:
            uncut = read.text if read.uncut is None else read.uncut
            read_bytes = max(1, len(uncut.encode("utf-8", "surrogatepass")))
            partial.append(
                Partial(
                    entry=entry,
                    note=note,
                    by="max_lines" if read.lines_omitted else entry.truncate_strategy,
                    uncut=uncut,
                    scale=max(1.0, read.size / read_bytes) if read.partial else 1.0,
                )
            )
        hashes[entry.path] = read.sha256
        # The formatter puts its own line break before the closing tag.
        text = read.text[:-1] if read.text.endswith("\n") else read.text
        blocks.append(
            Block.text(
                block_id(entry.path),
                layer_for(entry),
                text,
                priority=entry.priority,
                truncation=entry.truncate_strategy,
                tag=entry.role,
                trusted=False,  # file content is data: escaped by the xml formatter
                required=False,
                pre_truncated=note,
                provenance=Provenance(
                    plugin=plugin,
                    source_id=f"{manifest_path}#{entry.path}",
                    path=entry.path,
                    metadata={
                        "context_json": {
                            "attachments": [
                                {"path": entry.path, "sha256": read.sha256, "role": entry.role}
                            ]
                        }
                    },
                ),
            )
        )
    return WorkingSet(
        manifest=manifest,
        manifest_path=manifest_path,
        blocks=tuple(blocks),
        excluded=tuple(excluded),
        partial=tuple(partial),
        hashes=hashes,
    )


def boot_header(
    *,
    root_label: str,
    manifest_path: str,
    constitution: str | None,
    constitution_version: str | None,
    constitution_sha256: str | None,
    session_dir: str | None,
    output_sink: str | None,
    cache_hints: tuple[str, ...],
    tool_contract: str | None,
) -> str:
    """The working-set protocol's boot header: where things are, so the model can orient
    without reading everything. Lines whose value is not configured are left out."""
    lines = [f"Root: {root_label}"]
    if constitution:
        facts = []
        if constitution_version:
            facts.append(f"v{constitution_version.removeprefix('v')}")
        if constitution_sha256:
            facts.append(f"checksum: {constitution_sha256[:12]}")
        detail = f" ({', '.join(facts)})" if facts else ""
        lines.append(f"Constitution: {constitution}{detail}")
    if session_dir:
        lines.append(f"Session: {session_dir}")
    if output_sink:
        lines.append(f"Output sink: {output_sink}")
    lines.append(f"Working set: {manifest_path}")
    if cache_hints:
        lines.append(f"Cache hints: {', '.join(cache_hints)}")
    if tool_contract:
        lines.append(f"Tool contract: {tool_contract}")
    return "\n".join(lines)

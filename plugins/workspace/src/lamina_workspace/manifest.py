"""``working-set.yml`` (the working-set protocol): the schema, read with ruamel.yaml so every
error names the line and the key, and the document kept round-trip so updates preserve comments
and order."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Literal, NoReturn

from attrs import field, frozen

from lamina import ConfigError
from lamina_workspace.beneath import FileRefused
from lamina_workspace.files import read_text

PROTOCOL = "CONTEXT-ASSEMBLY/0.1"
_PROTOCOL_RE = re.compile(r"CONTEXT-ASSEMBLY/0\.\d+")
Role = Literal["system", "developer", "user", "context"]
ROLES: tuple[Role, ...] = ("system", "developer", "user", "context")
STRATEGIES = ("never", "start", "middle", "end")
ASSEMBLERS = ("model", "orchestrator", "user")
TOP_KEYS = ("protocol", "budget", "files", "metadata")
FILE_KEYS = ("path", "priority", "role", "truncate_strategy", "max_lines")
BUDGET_KEYS = ("max_tokens", "reserved_for_response", "effective")
#: A manifest larger than this is refused (it lists files; it does not hold them).
MAX_MANIFEST_BYTES = 4 * 1024 * 1024


class ManifestError(ConfigError):
    """A working-set manifest that does not match the schema: names the file, line and key."""

    def __init__(self, message: str, *, file: str, line: int | None, key: str | None) -> None:
        self.line = line
        where = f"{file}:{line}" if line is not None else file
        super().__init__(message, file=where, key=key)


@frozen(kw_only=True)
class FileEntry:
    """One file of the working set."""

    path: str
    priority: float = 0.5
    role: Role = "context"
    truncate_strategy: str = "end"
    max_lines: int | None = None
    line: int | None = None


@frozen(kw_only=True)
class Budget:
    """The manifest's budget; ``effective`` is what the context may use (max − reserve)."""

    max_tokens: int | None = None
    reserved_for_response: int = 0
    effective: int | None = None


@frozen(kw_only=True)
class Manifest:
    """A validated manifest."""

    source: str
    protocol: str = PROTOCOL
    budget: Budget | None = None
    files: tuple[FileEntry, ...] = ()
    metadata: dict[str, Any] = field(factory=dict)

    def entry(self, path: str) -> FileEntry | None:
        return next((f for f in self.files if f.path == path), None)


def yaml() -> Any:
    """A round-trip ruamel.yaml instance (comments, order and quoting preserved)."""
    from ruamel.yaml import YAML

    y = YAML(typ="rt")
    y.preserve_quotes = True
    y.indent(mapping=2, sequence=4, offset=2)
    y.width = 4096
    return y


def load_document(text: str, source: str) -> Any:
    """Parse YAML text round-trip; a syntax error names the line."""
    from ruamel.yaml.error import MarkedYAMLError, YAMLError

    try:
        return yaml().load(text)
    except MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark is not None else None
        problem = exc.problem or exc.context or "invalid YAML"
        raise ManifestError(f"not valid YAML: {problem}", file=source, line=line, key=None) from exc
    except YAMLError as exc:
        raise ManifestError(f"not valid YAML: {exc}", file=source, line=None, key=None) from exc


def _line(node: Any, key: Any = None, index: int | None = None) -> int | None:
    """1-based line of a mapping key, a sequence item, or the node itself."""
    lc = getattr(node, "lc", None)
    if lc is None:
        return None
    try:
        if key is not None:
            return int(lc.key(key)[0]) + 1
        if index is not None:
            return int(lc.item(index)[0]) + 1
        return int(lc.line) + 1
    except (KeyError, IndexError, TypeError, AttributeError):
        return int(lc.line) + 1 if lc.line is not None else None


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _integer(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def parse_manifest(doc: Any, source: str) -> Manifest:
    """Validate a loaded document against the schema."""

    def fail(
        message: str, node: Any, key: str | None, *, k: Any = None, i: int | None = None
    ) -> NoReturn:
        raise ManifestError(message, file=source, line=_line(node, k, i), key=key)

    if doc is None:
        doc = {}
    if not isinstance(doc, dict):
        fail(f"expected a mapping at the top, got {type(doc).__name__}", doc, None)
    for k in doc:
        if k not in TOP_KEYS:
            fail(f"unknown key; expected one of {', '.join(TOP_KEYS)}", doc, str(k), k=k)
    protocol = doc.get("protocol", PROTOCOL)
    if not isinstance(protocol, str) or not _PROTOCOL_RE.fullmatch(protocol):
        fail(
            f"unsupported protocol {protocol!r}; this reader understands CONTEXT-ASSEMBLY/0.x",
            doc,
            "protocol",
            k="protocol",
        )
    budget = _budget(doc, fail)
    files = _files(doc, fail)
    metadata = doc.get("metadata", {})
    if metadata is None:
        metadata = {}
    if not isinstance(metadata, dict):
        fail("expected a mapping", doc, "metadata", k="metadata")
    by = metadata.get("assembled_by")
    if by is not None and by not in ASSEMBLERS:
        fail(
            f"expected one of {', '.join(ASSEMBLERS)}, got {by!r}",
            metadata,
            "metadata.assembled_by",
            k="assembled_by",
        )
    return Manifest(
        source=source,
        protocol=str(protocol),
        budget=budget,
        files=files,
        metadata=_plain_metadata({str(k): v for k, v in metadata.items()}),
    )


def _plain_metadata(metadata: dict[str, Any]) -> dict[str, Any]:
    """The metadata in plain types (as the cache gives it back), else as ruamel read it."""
    from lamina_workspace.manifest_cache import NotPlain, plain

    try:
        return dict(plain(metadata))
    except NotPlain:
        return metadata


def _budget(doc: Any, fail: Any) -> Budget | None:
    raw = doc.get("budget")
    if raw is None:
        return None
    if not isinstance(raw, dict):
        fail("expected a mapping", doc, "budget", k="budget")
    for k in raw:
        if k not in BUDGET_KEYS:
            fail(f"unknown key; expected one of {', '.join(BUDGET_KEYS)}", raw, f"budget.{k}", k=k)
    values: dict[str, int | None] = {}
    for k in BUDGET_KEYS:
        v = raw.get(k)
        if v is not None and (not _integer(v) or v < (0 if k == "reserved_for_response" else 1)):
            floor = "≥ 0" if k == "reserved_for_response" else "> 0"
            fail(f"expected an integer {floor}, got {v!r}", raw, f"budget.{k}", k=k)
        values[k] = v
    max_tokens, reserved, effective = (
        values["max_tokens"],
        values["reserved_for_response"] or 0,
        values["effective"],
    )
    if max_tokens is not None:
        ceiling = max_tokens - reserved
        if ceiling <= 0:
            fail(
                f"reserved_for_response ({reserved}) leaves nothing of max_tokens ({max_tokens})",
                raw,
                "budget.reserved_for_response",
                k="reserved_for_response",
            )
        if effective is None:
            effective = ceiling
        elif effective > ceiling:
            fail(
                f"effective ({effective}) exceeds max_tokens − reserved_for_response ({ceiling})",
                raw,
                "budget.effective",
                k="effective",
            )
    return Budget(max_tokens=max_tokens, reserved_for_response=reserved, effective=effective)


def _files(doc: Any, fail: Any) -> tuple[FileEntry, ...]:
    raw = doc.get("files", [])
    if raw is None:
        return ()
    if not isinstance(raw, list):
        fail("expected a list of files", doc, "files", k="files")
    out: list[FileEntry] = []
    seen: dict[str, int] = {}
    for i, item in enumerate(raw):
        where = f"files[{i}]"
        if not isinstance(item, dict):
            fail("expected a mapping with at least path", raw, where, i=i)
        for k in item:
            if k not in FILE_KEYS:
                fail(
                    f"unknown key; expected one of {', '.join(FILE_KEYS)}",
                    item,
                    f"{where}.{k}",
                    k=k,
                )
        path = item.get("path")
        if not isinstance(path, str) or not path.strip():
            if "path" in item:
                fail(f"expected a non-empty string, got {path!r}", item, f"{where}.path", k="path")
            fail("required key path is missing", raw, f"{where}.path", i=i)
        priority = item.get("priority", 0.5)
        if not _number(priority) or not 0.0 <= priority <= 1.0:
            fail(
                f"expected a number within 0.0..1.0, got {priority!r}",
                item,
                f"{where}.priority",
                k="priority",
            )
        role = item.get("role", "context")
        if role not in ROLES:
            fail(
                f"expected one of {', '.join(ROLES)}, got {role!r}", item, f"{where}.role", k="role"
            )
        strategy = item.get("truncate_strategy", "end")
        if strategy not in STRATEGIES:
            fail(
                f"expected one of {', '.join(STRATEGIES)}, got {strategy!r}",
                item,
                f"{where}.truncate_strategy",
                k="truncate_strategy",
            )
        max_lines = item.get("max_lines")
        if max_lines is not None and (not _integer(max_lines) or max_lines < 1):
            fail(
                f"expected an integer > 0, got {max_lines!r}",
                item,
                f"{where}.max_lines",
                k="max_lines",
            )
        if path in seen:
            fail(
                f"{path!r} is listed twice (first as files[{seen[path]}])",
                item,
                f"{where}.path",
                k="path",
            )
        seen[path] = i
        out.append(
            FileEntry(
                path=str(path),
                priority=float(priority),
                role=str(role),  # type: ignore[arg-type]  # one of ROLES
                truncate_strategy=str(strategy),
                max_lines=None if max_lines is None else int(max_lines),
                line=_line(raw, index=i),
            )
        )
    return tuple(out)


def read_manifest(root: Path, path: str) -> Manifest:
    """Read and validate the manifest ``path`` beneath ``root`` (opened as every workspace
    file is: never through a symlink leading out, never more than ``MAX_MANIFEST_BYTES``).
    The last valid reading of unchanged text comes from Lamina's cache directory
    (``lamina_workspace.manifest_cache``) without parsing it again."""
    from lamina_workspace import manifest_cache

    try:
        text = read_text(root, path, max_bytes=MAX_MANIFEST_BYTES).text
    except FileRefused as exc:
        if exc.reason == "no such file":
            raise ManifestError(
                "working-set manifest not found", file=path, line=None, key=None
            ) from exc
        raise ManifestError(f"cannot read: {exc.reason}", file=path, line=None, key=None) from exc
    file = manifest_cache.cache_file()
    if file is None:
        return parse_manifest(load_document(text, path), path)
    kept, where = manifest_cache.entries(file), manifest_cache.location(root, path)
    key = manifest_cache.key(text, path)
    found = manifest_cache.read(kept, where, key, path)
    if found is None:
        found = parse_manifest(load_document(text, path), path)
        manifest_cache.write(file, kept, where, key, found)
    return found

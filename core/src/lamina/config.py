"""Configuration: ``lamina.toml`` or ``[tool.lamina]`` in ``pyproject.toml``, validated.

Every error names the file, the key path and what was expected. Per-plugin sections live under
``[plugins.<name>]`` and are validated by the plugin's own settings class once plugins load.
"""

from __future__ import annotations

import re
import string
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal, TypeVar

from attrs import Attribute, evolve, field, frozen, validators

from lamina.errors import ConfigError, SerdeError
from lamina.model.blocks import PLACEMENTS, Placement
from lamina.model.request import AgentRole, Tool
from lamina.serde import rebase_errors, structure

CONFIG_FILES = ("lamina.toml", "pyproject.toml")
#: Keys of ``[plugins]`` that steer loading; every other key there is a plugin's section.
LOADER_KEYS = frozenset({"enable", "disable", "require", "timeout"})


@frozen(kw_only=True)
class BudgetConfig:
    """Reserves taken off the model limit, and an optional cap on what is available.

    Unset reserves scale with the model: the response reserve is 4,096 tokens (no more than
    the model's max output or a quarter of its window), the tools reserve 8,192 (no more than
    an eighth of the window). Set values are taken as they are.
    """

    max_tokens: int | None = field(default=None, validator=validators.optional(validators.gt(0)))
    reserve_response: int | None = field(
        default=None, validator=validators.optional(validators.ge(0))
    )
    reserve_tools: int | None = field(default=None, validator=validators.optional(validators.ge(0)))
    context_window: int | None = field(
        default=None, validator=validators.optional(validators.gt(0))
    )


DEFAULT_RESERVE_RESPONSE = 4096
DEFAULT_RESERVE_TOOLS = 8192


def reserves(budget: BudgetConfig, context_window: int, max_output: int | None) -> tuple[int, int]:
    """The (response, tools) reserves for a model: set values as they are, unset ones scaled."""
    response = budget.reserve_response
    if response is None:
        response = min(DEFAULT_RESERVE_RESPONSE, max_output or DEFAULT_RESERVE_RESPONSE)
        response = min(response, context_window // 4)
    tools = budget.reserve_tools
    if tools is None:
        tools = min(DEFAULT_RESERVE_TOOLS, context_window // 8)
    return response, tools


@frozen(kw_only=True)
class LayerConfig:
    """Per-layer overrides: placement, a cap in tokens or a share of the budget, required-ness."""

    placement: Placement | None = field(
        default=None, validator=validators.optional(validators.in_(PLACEMENTS))
    )
    max_tokens: int | None = field(default=None, validator=validators.optional(validators.ge(0)))
    share: float | None = field(
        default=None, validator=validators.optional([validators.ge(0.0), validators.le(1.0)])
    )
    required: bool | None = None


#: A ``{count}`` format spec the gap marker may use: alignment, sign, a width under 100.
_MARKER_SPEC = re.compile(r"[<>^=]?[+-]?\d{0,2}[,_]?d?")


def _template(*names: str) -> Callable[[object, Attribute[str], str], None]:
    """A validator for a marker template: literal text and ``{name}`` fields from ``names``
    (with at most a width under 100), nothing that could reach into objects or allocate."""
    allowed = " and ".join(f"{{{n}}}" for n in names)

    def check(_inst: object, attr: Attribute[str], value: str) -> None:
        try:
            fields = list(string.Formatter().parse(value))
        except ValueError as exc:
            raise ValueError(
                f"'{attr.name}' is not a valid marker ({exc}); use {allowed} and literal text"
            ) from exc
        for _text, name, spec, conversion in fields:
            if name is None:
                continue
            if name not in names or conversion or not _MARKER_SPEC.fullmatch(spec or ""):
                raise ValueError(
                    f"'{attr.name}' may only use {allowed} (with at most a width under 100), "
                    f"not {{{name}{'!' + conversion if conversion else ''}"
                    f"{':' + spec if spec else ''}}}; write a literal brace as {{{{ or }}}}"
                )

    return check


@frozen(kw_only=True)
class FitConfig:
    """How history shrinks: the strategy, the turns always kept, the gap marker, the summarizer."""

    strategy: str = "truncateMiddle"
    minimum_recent: int = field(default=4, validator=validators.ge(0))
    marker: str = field(
        default="[… {count} earlier messages omitted …]", validator=_template("count")
    )
    summarizer: str | None = None


@frozen(kw_only=True)
class FormatConfig:
    """Which formatter renders each placement's text blocks."""

    system: str = "markdown"
    history: str = "xml"
    event: str = "plain"


@frozen(kw_only=True)
class StaticBlockConfig:
    """A block declared in config: inline ``text`` or a ``file`` (relative to the config file)."""

    id: str
    layer: str = "workspace"
    text: str | None = None
    file: str | None = None
    priority: float = field(default=0.5, validator=[validators.ge(0.0), validators.le(1.0)])
    truncation: str = "end"
    required: bool | None = None
    min_tokens: int = field(default=0, validator=validators.ge(0))
    max_tokens: int | None = field(default=None, validator=validators.optional(validators.ge(0)))
    title: str | None = None
    tag: str | None = None
    trusted: bool = True

    def __attrs_post_init__(self) -> None:
        if (self.text is None) == (self.file is None):
            raise ValueError(f"block {self.id!r} needs exactly one of text or file")


def _unique_block_ids(_inst: object, _attr: object, blocks: tuple[StaticBlockConfig, ...]) -> None:
    seen: dict[str, int] = {}
    for i, block in enumerate(blocks):
        if block.id in seen:
            raise ValueError(
                f"'blocks' has the id {block.id!r} twice: at blocks[{seen[block.id]}] and "
                f"blocks[{i}]"
            )
        seen[block.id] = i


@frozen(kw_only=True)
class ToolResultsConfig:
    """Caps on single tool results, applied before anything else is cut (inside protected
    turns too): a result over its cap keeps its head and tail around ``marker``. The cap is
    ``per_tool[name]``, else ``max_tokens``, else ``share`` of the available budget. A call
    whose arguments are over its tool's cap has its longest strings cut around
    ``call_marker`` (``lamina.assembly.call_caps``).

    Context editing: with ``stub_after = N`` (0: off), a result over ``stub_over`` tokens in
    a history turn older than the newest N is replaced by the one line ``stub``. Results
    are stubbed N turns at a time (a turn's results go once N to 2N - 1 newer turns follow),
    so the request's start changes once every N turns, not every turn."""

    max_tokens: int | None = field(default=None, validator=validators.optional(validators.gt(0)))
    share: float = field(default=0.25, validator=[validators.gt(0.0), validators.le(1.0)])
    per_tool: dict[str, int] = field(factory=dict)
    marker: str = field(
        default=(
            "\n[… {omitted} of {total} tokens of this {tool} result left out; call the tool "
            "again with a narrower request to see them …]\n"
        ),
        validator=_template("omitted", "total", "tool", "call_id"),
    )
    call_marker: str = field(
        default="[… {omitted} of {total} tokens of this {tool} call's arguments left out …]",
        validator=_template("omitted", "total", "tool", "call_id"),
    )
    stub_after: int = field(default=0, validator=validators.ge(0))
    stub_over: int = field(default=100, validator=validators.ge(0))
    stub: str = field(
        default=(
            "[{tool} result cleared from the context: {tokens} tokens, call {call_id} "
            "{arguments}; call the tool again to see it]"
        ),
        validator=_template("tool", "call_id", "tokens", "arguments"),
    )

    def __attrs_post_init__(self) -> None:
        if "\n" in self.stub:
            raise ValueError("'stub' must be one line (no newline)")
        for name, cap in self.per_tool.items():
            if cap <= 0:
                raise ValueError(f"'per_tool' cap for {name!r} must be > 0, got {cap}")


@frozen(kw_only=True)
class HistoryConfig:
    """Where history comes from when a request carries its own (``AssemblyRequest.history``)
    and a plugin (the ledger) supplies one too: ``prefer = "request"`` (the host's list wins)
    or ``"plugins"`` (the stored history wins). The report's ``history_source`` says which."""

    prefer: Literal["request", "plugins"] = field(
        default="request", validator=validators.in_(("request", "plugins"))
    )


@frozen(kw_only=True)
class ReportConfig:
    """What the assembly report lists: ``verbose = true`` lists every block fitting dropped in
    ``report.blocks`` too; by default they are summed up per layer in ``report.dropped``."""

    verbose: bool = False


@frozen(kw_only=True)
class PluginsConfig:
    """Which plugins load: ``enable`` is an allow-list, ``disable`` a deny-list, ``require``
    makes a load failure fatal; ``timeout`` is the default per-provider limit in seconds."""

    enable: tuple[str, ...] | None = None
    disable: tuple[str, ...] = ()
    require: tuple[str, ...] = ()
    timeout: float = field(default=10.0, validator=validators.gt(0))


@frozen(kw_only=True)
class LaminaConfig:
    """The whole configuration. ``path`` is the file it came from (``None`` for defaults);
    ``sections`` holds each plugin's raw section until the plugin validates it."""

    model: str = "gpt-4o"
    provider: str | None = None
    role: AgentRole = "unified"
    session: str = "default"
    workspace: str = "."
    permissions: tuple[str, ...] = ()
    budget: BudgetConfig = field(factory=BudgetConfig)
    fit: FitConfig = field(factory=FitConfig)
    format: FormatConfig = field(factory=FormatConfig)
    placement: dict[str, Placement] = field(factory=dict)
    layers: dict[str, LayerConfig] = field(factory=dict)
    blocks: tuple[StaticBlockConfig, ...] = field(default=(), validator=_unique_block_ids)
    tools: tuple[Tool, ...] = ()
    history: HistoryConfig = field(factory=HistoryConfig)
    tool_results: ToolResultsConfig = field(factory=ToolResultsConfig)
    report: ReportConfig = field(factory=ReportConfig)
    plugins: PluginsConfig = field(factory=PluginsConfig)
    sections: dict[str, dict[str, Any]] = field(factory=dict)
    path: str | None = None

    def key(self, path: str) -> str:
        """``path`` as the user wrote it: prefixed with ``tool.lamina.`` for pyproject.toml."""
        in_pyproject = self.path is not None and Path(self.path).name == "pyproject.toml"
        return f"tool.lamina.{path}" if in_pyproject else path

    @property
    def where(self) -> str:
        """The config file's path, or ``config`` for built-in defaults."""
        return self.path or "config"

    @property
    def root(self) -> Path:
        """The folder relative paths in this config are resolved against."""
        return Path(self.path).parent if self.path else Path.cwd()

    def resolve(self, relative: str) -> Path:
        """``relative`` resolved against the config file's folder."""
        p = Path(relative).expanduser()
        return p if p.is_absolute() else self.root / p


def find_config(start: Path | None = None) -> Path | None:
    """The nearest ``lamina.toml`` (or ``pyproject.toml`` with ``[tool.lamina]``) upwards of ``start``."""
    here = (start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        for name in CONFIG_FILES:
            candidate = folder / name
            if candidate.is_file() and (name == "lamina.toml" or _has_tool_lamina(candidate)):
                return candidate
    return None


def _has_tool_lamina(pyproject: Path) -> bool:
    try:
        return "lamina" in tomllib.loads(pyproject.read_text("utf-8")).get("tool", {})
    except (OSError, tomllib.TOMLDecodeError):
        return False


def load_config(path: str | Path | None = None, **overrides: Any) -> LaminaConfig:
    """Read and validate a config file (the nearest one when ``path`` is ``None``; defaults if
    there is none). ``overrides`` replace top-level fields after validation."""
    if path is None:
        found = find_config()
        config = parse_config({}, file=None) if found is None else _read(found)
    else:
        config = _read(Path(path))
    return evolve(config, **overrides) if overrides else config


def _read(path: Path) -> LaminaConfig:
    try:
        text = path.read_text("utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read config: {exc.strerror}", file=str(path)) from exc
    except UnicodeDecodeError as exc:
        raise ConfigError(
            f"not UTF-8 text (byte {exc.object[exc.start]:#04x} at offset {exc.start}): a "
            "config file is TOML",
            file=str(path),
        ) from exc
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"not valid TOML: {exc}", file=str(path)) from exc
    if path.name == "pyproject.toml":
        data = data.get("tool", {}).get("lamina")
        if data is None:
            raise ConfigError("no [tool.lamina] table", file=str(path))
        prefix = "tool.lamina."
    else:
        prefix = ""
    return parse_config(data, file=str(path.resolve()), prefix=prefix)


def parse_config(data: dict[str, Any], *, file: str | None, prefix: str = "") -> LaminaConfig:
    """Validate plain data (as TOML gives it) into a ``LaminaConfig``."""
    data = dict(data)
    for reserved in ("path", "sections"):
        if reserved in data:
            raise ConfigError("unknown key", file=file, key=f"{prefix}{reserved}")
    plugins = dict(data.pop("plugins", {}) or {})
    if not isinstance(plugins, dict):
        raise ConfigError("expected a table", file=file, key=f"{prefix}plugins")
    sections = {k: plugins.pop(k) for k in list(plugins) if k not in LOADER_KEYS}
    for name, section in sections.items():
        if not isinstance(section, dict):
            raise ConfigError(
                f"expected a table of settings for plugin {name!r} "
                f"(loader keys are {', '.join(sorted(LOADER_KEYS))})",
                file=file,
                key=f"{prefix}plugins.{name}",
            )
    data["plugins"] = plugins
    data["sections"] = sections
    try:
        config = structure(data, LaminaConfig, file=file, what="config")
    except SerdeError as exc:
        errors = rebase_errors(exc.errors, prefix.rstrip("."))
        raise SerdeError(errors, file=file, what="config") from exc
    return evolve(config, path=file)


_INERT_MARK = "__lamina_inert_without_section__"
_S = TypeVar("_S", bound=type)


def inert_without_section(cls: _S) -> _S:
    """Declare on a plugin's settings class that the plugin acts only when config has its
    section ``[plugins.<name>]``: without it the kernel skips the plugin's layer providers,
    block transforms, tool filters and assembly wrappers (its layers and commands stay)."""
    setattr(cls, _INERT_MARK, True)
    return cls


def is_inert_without_section(cls: type | None) -> bool:
    """Whether ``inert_without_section`` marks ``cls``."""
    return bool(cls is not None and getattr(cls, _INERT_MARK, False))

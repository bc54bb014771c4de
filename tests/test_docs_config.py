"""docs/configuration.md's "Every key, with its default" lists every key the config accepts and
no key it does not: a new setting cannot go undocumented, a removed one cannot linger."""

from __future__ import annotations

import re
from pathlib import Path

import attrs
import pytest

from lamina import Tool
from lamina.config import (
    BudgetConfig,
    FitConfig,
    FormatConfig,
    HistoryConfig,
    LaminaConfig,
    LayerConfig,
    PluginsConfig,
    ReportConfig,
    StaticBlockConfig,
    ToolResultsConfig,
)

PAGE = Path(__file__).resolve().parents[1] / "docs" / "configuration.md"
#: Each table of the block, and the class whose fields are its keys.
TABLES: dict[str, type] = {
    "budget": BudgetConfig,
    "fit": FitConfig,
    "format": FormatConfig,
    "history": HistoryConfig,
    "layers.*": LayerConfig,
    "blocks": StaticBlockConfig,
    "tools": Tool,
    "tool_results": ToolResultsConfig,
    "report": ReportConfig,
    "plugins": PluginsConfig,
}
#: Top-level fields that are tables (or set by Lamina, not written in a file).
NOT_KEYS = {"placement", "sections", "path"}


def documented() -> dict[str, set[str]]:
    """The keys of each table in the page's first TOML block (commented-out ones too)."""
    text = PAGE.read_text("utf-8")
    section = text.split("## Every key, with its default", 1)[1]
    block = section.split("```toml", 1)[1].split("```", 1)[0]
    keys: dict[str, set[str]] = {"": set()}
    table = ""
    for line in block.splitlines():
        header = re.match(r"\[\[?([a-z_.]+)\]\]?", line)
        if header:
            table = re.sub(r"^layers\.[a-z_]+$", "layers.*", header[1])
            keys.setdefault(table, set())
            continue
        key = re.match(r"(?:#\s*)?([a-z_]+)\s*=", line)
        if key:
            keys[table].add(key[1])
    return keys


def fields(cls: type) -> set[str]:
    return {f.name for f in attrs.fields(cls) if f.init}


def test_the_top_level_keys_are_documented() -> None:
    tables = {name.split(".")[0] for name in TABLES}
    expected = fields(LaminaConfig) - tables - NOT_KEYS
    assert documented()[""] == expected


@pytest.mark.parametrize("table", sorted(TABLES))
def test_every_key_of_a_table_is_documented(table: str) -> None:
    assert documented()[table] == fields(TABLES[table]), table

"""docs/guarantees.md names the test behind each promise: every one it names must exist."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CITED = re.compile(r"`([\w/.-]+\.py)::(\w+)`")


def test_every_test_the_guarantees_page_names_exists():
    page = (ROOT / "docs" / "guarantees.md").read_text(encoding="utf-8")
    cited = CITED.findall(page)
    assert len(cited) >= 20
    missing = [
        f"{path}::{name}"
        for path, name in cited
        if not (ROOT / path).exists()
        or not re.search(rf"^\s*def {name}\(", (ROOT / path).read_text(encoding="utf-8"), re.M)
    ]
    assert missing == []

"""Load the service configuration for the current environment."""

from __future__ import annotations

import os
import tomllib
from pathlib import Path

CONFIG_DIR = Path(__file__).resolve().parent.parent / "config"
ENVIRONMENTS = {"prod": "prod.toml", "staging": "staging.toml", "dev": "dev.toml"}


def environment() -> str:
    """The environment named by APP_ENV (default: dev)."""
    name = os.environ.get("APP_ENV", "dev")
    if name not in ENVIRONMENTS:
        raise ValueError(f"unknown APP_ENV {name!r}; expected one of {sorted(ENVIRONMENTS)}")
    return name


def load(name: str | None = None) -> dict:
    """Read config/<environment>.toml; values from the environment win over the file."""
    path = CONFIG_DIR / ENVIRONMENTS[name or environment()]
    with path.open("rb") as f:
        data = tomllib.load(f)
    if "DATABASE_URL" in os.environ:
        data.setdefault("database", {})["url"] = os.environ["DATABASE_URL"]
    return data


def check(data: dict) -> list[str]:
    """Problems a deploy should stop on: missing keys, obviously wrong values."""
    problems = []
    if "url" not in data.get("database", {}):
        problems.append("database.url is missing")
    if data.get("workers", 1) < 1:
        problems.append("workers must be at least 1")
    if data.get("feature_flags", {}).get("new_billing") and "billing" not in data:
        problems.append("feature_flags.new_billing is on but [billing] is missing")
    return problems

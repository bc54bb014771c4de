"""Running ``lamina assemble --format payload`` as a user would, for adapters' CLI tests."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

__all__ = ["payload_from_cli"]


def payload_from_cli(
    config: str,
    message: str,
    *,
    plugins: str,
    provider: str | None = None,
    time: str = "2026-01-02T03:04:05Z",
) -> Any:
    """Run ``lamina assemble --format payload`` as a user would (a subprocess, only the given
    installed ``plugins`` loaded) and return the printed request; fails with its stderr."""
    args = [sys.executable, "-m", "lamina", "assemble", "--config", config, "--message", message]
    args += ["--time", time, "--format", "payload"]
    if provider is not None:
        args += ["--provider", provider]
    out = subprocess.run(
        args, capture_output=True, text=True, env={**os.environ, "LAMINA_PLUGINS": plugins}
    )
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)

"""Hook implementations: the ``nexus`` layer (system prompt) and its provider.

Inert without a ``[plugins.nexus]`` section (its settings class says so). A snapshot that
cannot be read, parsed or produced becomes a warning in the report and the environment is
left out; the assembly goes on.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import lamina
from lamina import Block, ConfigError, LaminaConfig, LayerProvider, LayerSpec, Provenance
from lamina_nexus.render import render_environment, scope_for_task
from lamina_nexus.settings import NAME, Settings
from lamina_nexus.snapshot import (
    Snapshot,
    file_signature,
    parse_snapshot,
    read_snapshot_file,
    run_snapshot_command,
)

LAYER = "nexus"
BLOCK_ID = "nexus:environment"


class _Source:
    """Loads and renders snapshots for one assembler, remembering the last of each so an
    unchanged snapshot is neither re-parsed (file) nor re-rendered (any source)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._files: dict[str, tuple[tuple[int, int, int, int], Snapshot]] = {}
        self._renders: dict[tuple[Any, ...], str] = {}
        self.renders = 0  # how many times text was regenerated (for tests and tracing)

    def snapshot(self, config: LaminaConfig, settings: Settings) -> Snapshot:
        if settings.snapshot is not None:
            path = config.resolve(settings.snapshot)
            signature = file_signature(path)
            with self._lock:
                known = self._files.get(str(path))
            if known is not None and known[0] == signature:
                return known[1]
            raw, signature = read_snapshot_file(path)
            snap = parse_snapshot(raw, source=str(path))
            with self._lock:
                self._files[str(path)] = (signature, snap)
            return snap
        shown = " ".join(settings.command)
        out = run_snapshot_command(settings.command, timeout=settings.timeout, cwd=config.root)
        return parse_snapshot(out, source=f"command {shown!r}")

    def render(self, snap: Snapshot, settings: Settings, scope: set[str] | None) -> str:
        key = (
            snap.sha256,
            None if scope is None else tuple(sorted(scope)),
            settings.cli,
            settings.skill_command,
        )
        with self._lock:
            text = self._renders.get(key)
        if text is None:
            text = render_environment(
                snap, cli=settings.cli, skill_command=settings.skill_command, scope=scope
            )
            with self._lock:
                if len(self._renders) > 64:
                    self._renders.clear()
                self._renders[key] = text
                self.renders += 1
        return text


def _provider(source: _Source, timeout: float) -> LayerProvider:
    def provide(ctx: lamina.ProviderContext) -> Iterator[Block]:
        settings: Settings = ctx.settings
        snap = source.snapshot(ctx.config, settings)
        request = ctx.request
        scope: set[str] | None = None
        if request.role == "worker" and settings.worker_scope == "task":
            explicit = request.metadata.get("nexus_scope") or ()
            if isinstance(explicit, str):
                explicit = (explicit,)
            scope = scope_for_task(snap, request.task, tuple(str(x) for x in explicit))
        text = source.render(snap, settings, scope)
        shown = len(snap.capabilities) if scope is None else len(scope)
        yield Block.text(
            BLOCK_ID,
            LAYER,
            text,
            title=settings.title,
            trusted=True,  # our own rendering; every value in it is collapsed to one line
            truncation="never",
            provenance=Provenance(
                plugin=ctx.plugin,
                source_id=snap.source,
                path=settings.snapshot,
                metadata={
                    "context_json": {
                        "nexusEnv": {
                            "capabilityCount": shown,
                            "snapshotHash": snap.sha256,
                            "scoped": scope is not None,
                        }
                    }
                },
            ),
        )

    return LayerProvider(
        name="nexus-environment",
        provide=provide,
        layers=(LAYER,),
        required=False,
        timeout=timeout,
        description="condensed capability snapshot (nexus status --json --brief)",
    )


@lamina.hookimpl
def lamina_settings_class() -> type:
    return Settings


@lamina.hookimpl
def lamina_layers() -> list[LayerSpec]:
    return [
        LayerSpec(
            name=LAYER,
            placement="system",
            order=22,
            cut_rank=3,
            required=True,
            description="Nexus environment: capabilities, skills, credential counts",
        )
    ]


@lamina.hookimpl
def lamina_layer_providers(config: LaminaConfig, settings: Settings) -> list[LayerProvider]:
    # Without a section the kernel leaves this plugin's providers out (Settings is marked
    # inert_without_section) but still asks for them: only a configured section is checked.
    if NAME not in config.sections:
        return []
    if settings.snapshot is None and not settings.command:
        raise ConfigError(
            "set snapshot (a JSON file) or command (e.g. ['nexus', 'status', '--json', '--brief'])",
            file=config.path,
            key=f"plugins.{NAME}",
        )
    # A little longer than the command's own timeout, so its clearer message wins.
    return [_provider(_Source(), timeout=settings.timeout + 2.0)]

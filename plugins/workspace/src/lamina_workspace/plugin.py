"""Hook implementations of the ``workspace`` plugin.

Without a ``[plugins.workspace]`` section everything here is inert (its settings class says
so): the kernel then calls neither its providers nor its assembly wrapper.
"""

from __future__ import annotations

from collections.abc import Generator, Iterator
from typing import TYPE_CHECKING, Any

from attrs import evolve

import lamina
from lamina import (
    AssembledContext,
    AssemblyCall,
    Block,
    LaminaConfig,
    LayerProvider,
    LayerSpec,
    ProviderContext,
)
from lamina_workspace.beneath import printable
from lamina_workspace.fill import faithful_report, fill
from lamina_workspace.manifest import read_manifest
from lamina_workspace.settings import NAME, Settings
from lamina_workspace.system_prompt import RUNTIME_LAYER, SystemSources
from lamina_workspace.tools import WORKING_SET_TOOLS
from lamina_workspace.turn_loop import TurnLoop, TurnUpdates
from lamina_workspace.where import workspace_of
from lamina_workspace.working_set import (
    LAYER,
    SYSTEM_LAYER,
    WorkingSet,
    block_id,
    boot_header,
    build_working_set,
    layer_for,
)

if TYPE_CHECKING:
    import click

#: The request metadata key through which the wrapper hands the working set to the provider.
WORKING_SET_KEY = "lamina_workspace.working_set"

LAYERS = (
    LayerSpec(
        name=RUNTIME_LAYER,
        placement="system",
        order=24,
        cut_rank=3,
        required=True,
        description="static runtime info (host, os, arch) and role-specific rules",
    ),
    LayerSpec(
        name=SYSTEM_LAYER,
        placement="system",
        order=26,
        cut_rank=2,
        format="xml",
        description="working-set files with role system (<system>)",
    ),
    LayerSpec(
        name=LAYER,
        placement="event",
        order=45,
        cut_rank=-1,  # cut first: the manifest's own priorities decide, then memory, history
        format="xml",
        description="working-set files: <developer>, <user>, <context path=…>",
    ),
)


# -- providers -------------------------------------------------------------------------------


def _system_provider(config: LaminaConfig, settings: Settings) -> LayerProvider:
    sources = SystemSources(config, settings, NAME)

    def provide(ctx: ProviderContext) -> Iterator[Block]:
        if settings.working_set is not None and settings.boot.enabled:
            yield _boot_block(ctx, settings, sources)
        yield from sources.blocks(ctx.request)

    return LayerProvider(
        name="workspace",
        provide=provide,
        layers=(lamina.WORKSPACE, lamina.PERSONA, RUNTIME_LAYER),
        required=True,
        description="AGENTS.md, user IDENTITY.md, persona SOUL.md/IDENTITY.md, runtime, role rules",
    )


def _boot_block(ctx: ProviderContext, settings: Settings, sources: SystemSources) -> Block:
    boot = settings.boot
    checksum = None
    if boot.constitution:
        got = sources.read("constitution", boot.constitution, key="boot.constitution")
        checksum = got[1] if got else None
    session = None
    if boot.session_dir:
        session = boot.session_dir.format(session=ctx.request.session_label)
    text = boot_header(
        root_label=settings.root,
        manifest_path=settings.working_set or "",
        constitution=boot.constitution,
        constitution_version=boot.constitution_version,
        constitution_sha256=checksum,
        session_dir=session,
        output_sink=boot.output_sink,
        cache_hints=boot.cache_hints,
        tool_contract=boot.tool_contract,
    )
    return Block.text(
        "workspace:boot",
        lamina.WORKSPACE,
        text,
        title="Boot",
        trusted=True,
        truncation="never",
        provenance=lamina.Provenance(plugin=ctx.plugin, source_id="boot"),
    )


def _working_set_provider() -> LayerProvider:
    def provide(ctx: ProviderContext) -> Iterator[Block]:
        ws = ctx.request.metadata.get(WORKING_SET_KEY)
        if not isinstance(ws, WorkingSet):
            return
        for ex in ws.excluded:
            shown = printable(ex.entry.path)  # a path the model chose: no line breaks
            ctx.exclude(
                id=block_id(shown),
                layer=layer_for(ex.entry),
                reason=f"refused: {ex.reason}",
                path=shown,
            )
            ctx.warn(f"working set {ws.manifest_path}: {shown} refused: {ex.reason}")
        for warning in ws.warnings:
            ctx.warn(f"working set {ws.manifest_path}: {warning}")
        yield from fill(ctx, ws)

    return LayerProvider(
        name="working-set",
        provide=provide,
        layers=(LAYER, SYSTEM_LAYER),
        required=True,
        description="files of working-set.yml, by priority, tagged with their role",
    )


# -- hooks -----------------------------------------------------------------------------------


@lamina.hookimpl
def lamina_settings_class() -> type:
    return Settings


@lamina.hookimpl
def lamina_layers() -> tuple[LayerSpec, ...]:
    return LAYERS


@lamina.hookimpl
def lamina_layer_providers(config: LaminaConfig, settings: Settings) -> list[LayerProvider]:
    return [_system_provider(config, settings), _working_set_provider()]


@lamina.hookimpl(wrapper=True)
def lamina_wrap_assembly(call: AssemblyCall) -> Generator[None, Any, AssembledContext]:
    """The working set around the pipeline: the turn loop's rules run first (when enabled),
    then the manifest is read (no file further than its budget could use) for the provider,
    which yields the files within the manifest's ``effective`` budget; the working-set tools
    are offered when enabled. Afterwards the latest reply's references are bumped and the
    report shows what files cut while read held before the cut."""
    config = call.config
    settings = call.settings(NAME)
    if not isinstance(settings, Settings) or settings.working_set is None:
        result: AssembledContext = yield
        return result
    try:
        ws = workspace_of(config, settings)
        loop = TurnLoop(ws, settings.orchestrator) if settings.orchestrator.enabled else None
        before = loop.before(call.request) if loop else TurnUpdates()
        manifest = read_manifest(ws.root, ws.manifest)
    except lamina.LaminaError as exc:  # a malformed manifest: the error says whose it is
        exc.plugin = exc.plugin or NAME
        raise
    request = call.request
    cap = manifest.budget.effective if manifest.budget else None
    limit = cap or request.max_tokens or config.budget.max_tokens
    if limit is None:
        limit = call.model_info().context_window
    found = build_working_set(
        manifest,
        manifest_path=ws.manifest,
        root=ws.root,
        max_bytes=min(settings.max_read_bytes, limit * settings.bytes_per_token),
        plugin=NAME,
    )
    found = evolve(found, warnings=before.warnings)
    changes: dict[str, Any] = {"metadata": {**request.metadata, WORKING_SET_KEY: found}}
    if settings.tools:
        offered = {t.name for t in request.tools}
        extra = tuple(t for t in WORKING_SET_TOOLS if t.name not in offered)
        changes["tools"] = (*request.tools, *extra)
    call.request = evolve(request, **changes)
    done: AssembledContext = yield
    if loop is not None:
        loop.after(request, done.history)
    return faithful_report(done)


@lamina.hookimpl
def lamina_commands(cli: click.Group) -> None:
    from lamina_workspace.cli import working_set  # only for `lamina working-set`

    cli.add_command(working_set)

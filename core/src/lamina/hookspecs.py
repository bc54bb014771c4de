"""Lamina's hook specifications: the contract every plugin is written against.

A plugin is a module (or object) with functions marked ``@lamina.hookimpl`` whose names and
arguments match the specs below; it may accept any subset of a spec's arguments. The specs
are listed by family, in the order an assembly meets them:

1. ``lamina_settings_class``: the attrs class that validates the plugin's config section
   ``[plugins.<name>]``; the validated object reaches the plugin's other hooks as
   ``settings``. Decorating that class with ``@lamina.inert_without_section`` makes the
   plugin supply no providers, transforms, tool filters or assembly wrappers while config has
   no section for it.
2. ``lamina_layers``: the conceptual layers, their placement, order and cut rank.
3. ``lamina_model_info`` and ``lamina_tokenizer``: first-result hooks asked once per model
   (the answer is cached); the latest-registered plugin is asked first and built-ins last.
4. ``lamina_wrap_assembly``: runs once per request around the pipeline; the pipeline itself is
   the innermost implementation, so a wrapper sees and may change the call and the result.
5. ``lamina_tool_filters``: which tools the caller may have (the plan phase).
6. ``lamina_layer_providers`` and ``lamina_block_transforms``: the blocks of each request
   (the gather phase).
7. ``lamina_truncators``, ``lamina_fit_strategies`` and ``lamina_summarizers``: how blocks
   and history are cut (the fit phase).
8. ``lamina_formatters``: how blocks are rendered (the format phase).
9. ``lamina_adapters`` and ``lamina_commands``: provider requests built from an assembled
   context, and ``lamina`` subcommands.
10. ``lamina_session_stores``: where a long-running host (``lamina serve``) keeps sessions
    between requests, and records the turns the agent finished.

*Collection hooks* (every hook returning records) are called once per ``Assembler``, one
plugin at a time through pluggy, so each record is attributed to the plugin that supplied it
and two records of one kind with one name are refused, naming both distributions. Besides
the spec's own arguments a hook may take ``config`` and ``settings``.
"""

from __future__ import annotations

from collections.abc import Generator, Iterable
from typing import TYPE_CHECKING, Any

import pluggy

if TYPE_CHECKING:
    import click

    from lamina.call import AssemblyCall
    from lamina.config import LaminaConfig
    from lamina.model import AssembledContext
    from lamina.records import (
        Adapter,
        BlockTransform,
        FitStrategy,
        Formatter,
        LayerProvider,
        LayerSpec,
        ModelInfo,
        SessionStore,
        Summarizer,
        Tokenizer,
        ToolFilter,
        Truncator,
    )

PROJECT = "lamina"
hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)


@hookspec
def lamina_settings_class() -> type | None:
    """Return the attrs class (``kw_only``) for this plugin's config section.

    The section ``[plugins.<plugin name>]`` is validated against it (unknown keys are errors
    naming the file and key path) and handed to the plugin's collection hooks as ``settings``.

    Example::

        @attrs.frozen(kw_only=True)
        class Settings:
            path: str = "ledger.db"

        @lamina.hookimpl
        def lamina_settings_class():
            return Settings
    """


@hookspec
def lamina_layers(config: LaminaConfig, settings: Any) -> Iterable[LayerSpec]:  # type: ignore[empty-body]
    """Declare conceptual layers: their default placement, order and cut rank.

    The built-in layers (workspace, persona, session, memory, event) are declared this way.

    Example::

        @lamina.hookimpl
        def lamina_layers():
            return [LayerSpec(name="scratchpad", placement="event", order=45, cut_rank=0)]
    """


@hookspec(firstresult=True)
def lamina_model_info(model: str, config: LaminaConfig, settings: Any) -> ModelInfo | None:
    """Return what is known of ``model`` (context window, max output, minimum cacheable prefix),
    or ``None``. The first answer wins; the built-in table answers last.

    Example::

        @lamina.hookimpl
        def lamina_model_info(model):
            if model == "my-finetune":
                return ModelInfo(name=model, context_window=32_768, encoding="cl100k_base")
    """


@hookspec(firstresult=True)
def lamina_tokenizer(
    model: str, info: ModelInfo, config: LaminaConfig, settings: Any
) -> Tokenizer | None:
    """Return a tokenizer for ``model``, or ``None`` to let the next plugin answer.

    The first non-``None`` answer wins; plugins registered later are asked first, and the
    built-in ~4 characters/token estimate answers last.

    Example::

        @lamina.hookimpl
        def lamina_tokenizer(model):
            if model.startswith("llama"):
                return MySentencePieceTokenizer()
    """


@hookspec(firstresult=True)
def lamina_wrap_assembly(  # type: ignore[empty-body]
    call: AssemblyCall,
) -> Generator[None, Any, AssembledContext] | AssembledContext:
    """Wrap an assembly: implement it with ``wrapper=True`` to change ``call.request`` or
    ``call.overrides`` before the pipeline runs (hook injections, per-tree preferences) or to
    look at and replace the result (tracing). ``call.config``, ``call.settings(plugin)``,
    ``call.model_info()`` and ``call.kernel.strategies`` are read-only views of the kernel.

    Example::

        @lamina.hookimpl(wrapper=True)
        def lamina_wrap_assembly(call):
            call.request = attrs.evolve(call.request, event=inject(call.request.event))
            started = time.perf_counter()
            result = yield
            log.info("assembled in %.1f ms", 1000 * (time.perf_counter() - started))
            return result
    """


@hookspec
def lamina_tool_filters(config: LaminaConfig, settings: Any) -> Iterable[ToolFilter]:  # type: ignore[empty-body]
    """Return tool filters; a tool reaches the context only if every filter allows it for the
    request (the built-in ``permissions`` filter checks ``Tool.permission``).

    Example::

        @lamina.hookimpl
        def lamina_tool_filters():
            return [ToolFilter(name="no-shell-for-workers",
                               allows=lambda tool, req: not (req.role == "worker" and tool.name == "shell"))]
    """


@hookspec
def lamina_layer_providers(config: LaminaConfig, settings: Any) -> Iterable[LayerProvider]:  # type: ignore[empty-body]
    """Return the layer providers this plugin supplies; each yields Blocks per request.

    Providers run concurrently; ``provide`` gets a ``ProviderContext`` (request, config, this
    plugin's settings, the planned budget, the tokenizer, the clock).

    Example::

        def provide(ctx):
            yield Block.text("rules", "workspace", Path("AGENTS.md").read_text(), trusted=True)

        @lamina.hookimpl
        def lamina_layer_providers():
            return [LayerProvider(name="rules", provide=provide, layers=("workspace",))]
    """


@hookspec
def lamina_block_transforms(config: LaminaConfig, settings: Any) -> Iterable[BlockTransform]:  # type: ignore[empty-body]
    """Return block transforms, run on every gathered block before it is measured.

    Example::

        def mask(block, ctx):
            text = block.body
            return block.with_text(text.replace("hunter2", "[secret]")) if "hunter2" in text else block

        @lamina.hookimpl
        def lamina_block_transforms():
            return [BlockTransform(name="mask-passwords", transform=mask)]
    """


@hookspec
def lamina_truncators(config: LaminaConfig, settings: Any) -> Iterable[Truncator]:  # type: ignore[empty-body]
    """Return named text truncators (built in: ``never``, ``start``, ``middle``, ``end``).

    A block's ``truncation`` names the truncator used when the block must shrink.

    Example::

        @lamina.hookimpl
        def lamina_truncators():
            return [Truncator(name="lines-tail", truncate=keep_last_lines)]
    """


@hookspec
def lamina_fit_strategies(config: LaminaConfig, settings: Any) -> Iterable[FitStrategy]:  # type: ignore[empty-body]
    """Return named history fit strategies (built in: ``truncateMiddle``, ``rollingWindow``,
    ``stopAtLimit``); ``[fit] strategy`` picks one.

    Example::

        @lamina.hookimpl
        def lamina_fit_strategies():
            return [FitStrategy(name="keepFirstAndLast", select=select_first_and_last)]
    """


@hookspec
def lamina_summarizers(config: LaminaConfig, settings: Any) -> Iterable[Summarizer]:  # type: ignore[empty-body]
    """Return named summarizers used to compact blocks marked ``summarizable``
    (``[fit] summarizer`` picks one) and the ledger's history (``[plugins.ledger]
    summarizer``). ``summarize`` may take an ``instructions`` keyword (a caller's custom
    instructions, e.g. ``compact(instructions=...)``); one that raises is reported and the
    kernel cuts without it, the ledger falls back to its extractive summary. The adapter kit's
    ``lamina.adapters.llm_summarizer`` builds one that asks a model through an adapter's ``send``.

    Example::

        @lamina.hookimpl
        def lamina_summarizers():
            return [Summarizer(name="llm", summarize=call_my_model)]
    """


@hookspec
def lamina_formatters(config: LaminaConfig, settings: Any) -> Iterable[Formatter]:  # type: ignore[empty-body]
    """Return named formatters (built in: ``xml``, ``markdown``, ``plain``); ``[format]``
    picks one per placement.

    Example::

        @lamina.hookimpl
        def lamina_formatters():
            return [Formatter(name="json", render=lambda b: json.dumps({"id": b.id, "text": b.body}))]
    """


@hookspec
def lamina_adapters(config: LaminaConfig, settings: Any) -> Iterable[Adapter]:  # type: ignore[empty-body]
    """Return provider adapters (``lamina assemble --provider NAME --format payload``).
    An adapter may also ``send`` (and ``asend``) the payload it builds and return the reply as
    an ``AgentResult``; ``lamina.adapters`` has the kit the first-party adapters share.

    Example::

        @lamina.hookimpl
        def lamina_adapters():
            return [Adapter(name="echo", build_request=lambda ctx, opts: {"prompt": ctx.system_prompt},
                            parse_usage=lambda resp: Usage(input_tokens=resp["in"]))]
    """


@hookspec
def lamina_commands(cli: click.Group) -> None:
    """Add subcommands to the ``lamina`` command line. ``lamina.config_option`` gives a
    command the same ``--config/-c`` as the built-in ones (as ``config_path``).

    Example::

        @lamina.hookimpl
        def lamina_commands(cli):
            @cli.command()
            @lamina.config_option
            def hello(config_path):
                click.echo(f"hello from {lamina.load_config(config_path).path}")
    """


@hookspec
def lamina_session_stores(config: LaminaConfig, settings: Any) -> Iterable[SessionStore]:  # type: ignore[empty-body]
    """Return session stores: where ``lamina serve`` (or any long-running host) assembles a
    stored session's turns, records the ``AgentResult`` of each finished turn, compacts and
    totals sessions. The service uses the one store installed (``--store`` picks among
    several); the ledger plugin supplies ``ledger``.

    Each callable takes the ``Assembler`` first; keep per-assembler state (open connections)
    keyed by it, and release it in ``close``. A session the store does not know raises
    ``LookupError``. The optional ``turn_stats`` (statistics turn by turn, JSON-ready) and
    ``stats_page`` (one self-contained HTML page) back ``GET /v1/sessions/{label}/stats``'s
    ``per_turn=true`` and ``format=html``; without them those requests get a 400 naming the
    missing field.

    Example::

        sessions: dict[str, list[Message]] = {}

        def record(assembler, label, result):
            sessions.setdefault(label, []).extend(result.messages)
            return f"{label}:{len(sessions[label])}"

        def assemble(assembler, request):
            history = tuple(sessions.get(request.session_label, ()))
            return assembler.assemble(attrs.evolve(request, history=history))

        @lamina.hookimpl
        def lamina_session_stores():
            return [SessionStore(name="memory", assemble=assemble, record=record,
                                 compact=no_compaction, stats=count_turns)]
    """

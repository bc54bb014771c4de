"""Lamina: assemble the context an LLM sees each turn, fitted to its token budget and laid out
so the provider's prompt cache keeps hitting.

The public API is what this module exports; plugins use nothing else. Names load on first use
(``lamina.Assembler`` imports the engine then), so ``import lamina`` and the command line start
at once; ``tests/test_architecture.py`` keeps the lazy table and the typed imports in step.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the same names, for type checkers (``X as X``: re-exported)
    from lamina.adapters.send import ContextOverflowError as ContextOverflowError
    from lamina.adapters.send import SendError as SendError
    from lamina.assembly.engine import Assembler as Assembler
    from lamina.assembly.measure import IMAGE_TOKENS as IMAGE_TOKENS
    from lamina.assembly.measure import count_ids as count_ids
    from lamina.assembly.measure import count_parts as count_parts
    from lamina.assembly.tool_json import tools_digest as tools_digest
    from lamina.call import (
        AssemblyCall as AssemblyCall,
    )
    from lamina.call import (
        KernelView as KernelView,
    )
    from lamina.call import (
        Overrides as Overrides,
    )
    from lamina.cli_options import config_option as config_option
    from lamina.config import (
        LaminaConfig as LaminaConfig,
    )
    from lamina.config import (
        inert_without_section as inert_without_section,
    )
    from lamina.config import (
        load_config as load_config,
    )
    from lamina.encodings import cache_dir as cache_dir
    from lamina.encodings import write_atomically as write_atomically
    from lamina.errors import (
        BudgetError as BudgetError,
    )
    from lamina.errors import (
        ConfigError as ConfigError,
    )
    from lamina.errors import (
        LaminaError as LaminaError,
    )
    from lamina.errors import (
        LaminaWarning as LaminaWarning,
    )
    from lamina.errors import (
        PluginError as PluginError,
    )
    from lamina.errors import (
        ProviderError as ProviderError,
    )
    from lamina.errors import (
        SerdeError as SerdeError,
    )
    from lamina.hookspecs import hookimpl as hookimpl
    from lamina.hookspecs import hookspec as hookspec
    from lamina.html.shell import html_escape as html_escape
    from lamina.html.shell import html_page as html_page
    from lamina.log import Progress as Progress
    from lamina.log import progress as progress
    from lamina.model import (
        EVENT as EVENT,
    )
    from lamina.model import (
        MEMORY as MEMORY,
    )
    from lamina.model import (
        PERSONA as PERSONA,
    )
    from lamina.model import (
        SESSION as SESSION,
    )
    from lamina.model import (
        WORKSPACE as WORKSPACE,
    )
    from lamina.model import (
        AgentResult as AgentResult,
    )
    from lamina.model import (
        AssembledContext as AssembledContext,
    )
    from lamina.model import (
        AssemblyReport as AssemblyReport,
    )
    from lamina.model import (
        AssemblyRequest as AssemblyRequest,
    )
    from lamina.model import (
        Block as Block,
    )
    from lamina.model import (
        BlockReport as BlockReport,
    )
    from lamina.model import (
        BudgetUsage as BudgetUsage,
    )
    from lamina.model import (
        Chunked as Chunked,
    )
    from lamina.model import (
        DroppedReport as DroppedReport,
    )
    from lamina.model import (
        Event as Event,
    )
    from lamina.model import (
        ImagePart as ImagePart,
    )
    from lamina.model import (
        Message as Message,
    )
    from lamina.model import (
        MessageRole as MessageRole,
    )
    from lamina.model import (
        ModelConfig as ModelConfig,
    )
    from lamina.model import (
        Part as Part,
    )
    from lamina.model import (
        Provenance as Provenance,
    )
    from lamina.model import (
        TextPart as TextPart,
    )
    from lamina.model import (
        TokenBudget as TokenBudget,
    )
    from lamina.model import (
        Tool as Tool,
    )
    from lamina.model import (
        ToolCallPart as ToolCallPart,
    )
    from lamina.model import (
        ToolResultPart as ToolResultPart,
    )
    from lamina.model import (
        Usage as Usage,
    )
    from lamina.model import (
        attachment_record as attachment_record,
    )
    from lamina.model import (
        event_context as event_context,
    )
    from lamina.plugins import Attributed as Attributed
    from lamina.plugins import Registry as Registry
    from lamina.records import (
        Adapter as Adapter,
    )
    from lamina.records import (
        BlockTransform as BlockTransform,
    )
    from lamina.records import (
        CompactionOutcome as CompactionOutcome,
    )
    from lamina.records import (
        CompactionRequest as CompactionRequest,
    )
    from lamina.records import (
        FitStrategy as FitStrategy,
    )
    from lamina.records import (
        Formatter as Formatter,
    )
    from lamina.records import (
        HistoryCut as HistoryCut,
    )
    from lamina.records import (
        LayerProvider as LayerProvider,
    )
    from lamina.records import (
        LayerSpec as LayerSpec,
    )
    from lamina.records import (
        LayerView as LayerView,
    )
    from lamina.records import (
        ModelInfo as ModelInfo,
    )
    from lamina.records import (
        ProviderContext as ProviderContext,
    )
    from lamina.records import (
        SessionStats as SessionStats,
    )
    from lamina.records import (
        SessionStore as SessionStore,
    )
    from lamina.records import (
        Summarizer as Summarizer,
    )
    from lamina.records import (
        Tokenizer as Tokenizer,
    )
    from lamina.records import (
        ToolFilter as ToolFilter,
    )
    from lamina.records import (
        Truncator as Truncator,
    )
    from lamina.serde import (
        from_json as from_json,
    )
    from lamina.serde import (
        structure as structure,
    )
    from lamina.serde import (
        to_json as to_json,
    )
    from lamina.serde import (
        unstructure as unstructure,
    )
    from lamina.truncation import longest_fitting as longest_fitting
    from lamina.wording import counted as counted
    from lamina.wording import plural as plural

#: Each exported name and the module that defines it.
_EXPORTS: dict[str, str] = {
    "Adapter": "lamina.records",
    "AgentResult": "lamina.model",
    "AssembledContext": "lamina.model",
    "Assembler": "lamina.assembly.engine",
    "AssemblyCall": "lamina.call",
    "AssemblyReport": "lamina.model",
    "AssemblyRequest": "lamina.model",
    "Attributed": "lamina.plugins",
    "Block": "lamina.model",
    "BlockReport": "lamina.model",
    "BlockTransform": "lamina.records",
    "BudgetError": "lamina.errors",
    "BudgetUsage": "lamina.model",
    "Chunked": "lamina.model",
    "DroppedReport": "lamina.model",
    "CompactionOutcome": "lamina.records",
    "CompactionRequest": "lamina.records",
    "ConfigError": "lamina.errors",
    "EVENT": "lamina.model",
    "Event": "lamina.model",
    "event_context": "lamina.model",
    "counted": "lamina.wording",
    "config_option": "lamina.cli_options",
    "SendError": "lamina.adapters.send",
    "ContextOverflowError": "lamina.adapters.send",
    "plural": "lamina.wording",
    "attachment_record": "lamina.model",
    "FitStrategy": "lamina.records",
    "Formatter": "lamina.records",
    "HistoryCut": "lamina.records",
    "IMAGE_TOKENS": "lamina.assembly.measure",
    "ImagePart": "lamina.model",
    "KernelView": "lamina.call",
    "LaminaConfig": "lamina.config",
    "LaminaError": "lamina.errors",
    "LaminaWarning": "lamina.errors",
    "LayerProvider": "lamina.records",
    "LayerSpec": "lamina.records",
    "LayerView": "lamina.records",
    "MEMORY": "lamina.model",
    "Message": "lamina.model",
    "MessageRole": "lamina.model",
    "ModelConfig": "lamina.model",
    "ModelInfo": "lamina.records",
    "Overrides": "lamina.call",
    "PERSONA": "lamina.model",
    "Part": "lamina.model",
    "PluginError": "lamina.errors",
    "Progress": "lamina.log",
    "Provenance": "lamina.model",
    "ProviderContext": "lamina.records",
    "ProviderError": "lamina.errors",
    "Registry": "lamina.plugins",
    "SESSION": "lamina.model",
    "SerdeError": "lamina.errors",
    "SessionStats": "lamina.records",
    "SessionStore": "lamina.records",
    "Summarizer": "lamina.records",
    "TextPart": "lamina.model",
    "TokenBudget": "lamina.model",
    "Tokenizer": "lamina.records",
    "Tool": "lamina.model",
    "ToolCallPart": "lamina.model",
    "ToolFilter": "lamina.records",
    "ToolResultPart": "lamina.model",
    "Truncator": "lamina.records",
    "Usage": "lamina.model",
    "WORKSPACE": "lamina.model",
    "cache_dir": "lamina.encodings",
    "count_ids": "lamina.assembly.measure",
    "count_parts": "lamina.assembly.measure",
    "from_json": "lamina.serde",
    "hookimpl": "lamina.hookspecs",
    "hookspec": "lamina.hookspecs",
    "html_escape": "lamina.html.shell",
    "html_page": "lamina.html.shell",
    "inert_without_section": "lamina.config",
    "load_config": "lamina.config",
    "longest_fitting": "lamina.truncation",
    "progress": "lamina.log",
    "structure": "lamina.serde",
    "to_json": "lamina.serde",
    "tools_digest": "lamina.assembly.tool_json",
    "unstructure": "lamina.serde",
    "write_atomically": "lamina.encodings",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'lamina' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_EXPORTS})

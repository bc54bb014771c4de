"""Plugins: loading (``_host``), the attributed pluggy manager (``_manager``), settings
(``_settings``) and the resolved records (``_registry``). Internal to the kernel."""

from lamina.plugins._host import (
    BUILTINS,
    ENTRY_POINT_GROUP,
    ENV_ALLOW_LIST,
    ESSENTIAL,
    INERT_HOOKS,
    KERNEL_DISTRIBUTION,
    PluginHost,
    PluginInfo,
)
from lamina.plugins._manager import ENV_TRACE, LaminaPluginManager
from lamina.plugins._registry import Attributed, Registry

__all__ = [
    "BUILTINS",
    "ENTRY_POINT_GROUP",
    "ENV_ALLOW_LIST",
    "ENV_TRACE",
    "ESSENTIAL",
    "INERT_HOOKS",
    "KERNEL_DISTRIBUTION",
    "Attributed",
    "LaminaPluginManager",
    "PluginHost",
    "PluginInfo",
    "Registry",
]

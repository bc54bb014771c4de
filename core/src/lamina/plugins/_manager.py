"""pluggy's plugin manager, with every kernel call attributed to the plugin that answered.

Collection and first-result hooks take per-plugin ``settings``, so the kernel asks one plugin
at a time, each through a pluggy caller restricted to that plugin (``subset_hook_caller``):
the calls stay in pluggy's own call path, where monitoring and tracing see them, and every
answer is known to come from its plugin. ``LAMINA_TRACE_PLUGINS=1`` prints every hook call.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Collection, Iterator
from typing import Any

import pluggy

from lamina import hookspecs
from lamina.errors import LaminaError, PluginError

ENV_TRACE = "LAMINA_TRACE_PLUGINS"


class LaminaPluginManager(pluggy.PluginManager):
    """The kernel's plugin manager: the lamina hook specs, attributed calls, optional tracing."""

    def __init__(self) -> None:
        super().__init__(hookspecs.PROJECT)
        self.add_hookspecs(hookspecs)
        self._single: dict[tuple[str, str], pluggy.HookCaller] = {}
        self.monitored = 0  # hook call monitors added (see add_hookcall_monitoring)
        if os.environ.get(ENV_TRACE, "") not in ("", "0"):
            self.trace.root.setwriter(sys.stderr.write)
            self.enable_tracing()

    def add_hookcall_monitoring(self, before: Any, after: Any) -> Callable[[], None]:
        """Pluggy's monitoring (tracing uses it); while it is on, ``monitored`` is true and
        the kernel calls every hook through pluggy, even one nothing implements."""
        undo = super().add_hookcall_monitoring(before, after)
        self.monitored += 1

        def undone() -> None:
            undo()
            self.monitored -= 1

        return undone

    def register(self, plugin: object, name: str | None = None) -> str | None:
        self._single.clear()
        return super().register(plugin, name)

    def unregister(self, plugin: object | None = None, name: str | None = None) -> Any:
        self._single.clear()
        return super().unregister(plugin, name)

    def implementers(self, hook: str) -> list[str]:
        """Plugins implementing ``hook`` (wrappers aside), in registration order (pluggy
        calls them, and a first-result hook asks them, in the reverse order)."""
        caller: pluggy.HookCaller = getattr(self.hook, hook)
        return [i.plugin_name for i in caller.get_hookimpls() if not (i.wrapper or i.hookwrapper)]

    def call_one(self, hook: str, plugin: str, kwargs: dict[str, Any]) -> Any:
        """Call one plugin's implementation of ``hook`` through pluggy; its errors become
        ``PluginError`` s naming it (a ``LaminaError`` already names its cause)."""
        caller = self._single.get((hook, plugin))
        if caller is None:
            target = self.get_plugin(plugin)
            others = [p for p in self.get_plugins() if p is not target]
            caller = self._single[(hook, plugin)] = self.subset_hook_caller(hook, others)
        try:
            result = caller(**kwargs)
        except LaminaError:
            raise
        except Exception as exc:
            raise PluginError(f"{hook} raised {type(exc).__name__}: {exc}", plugin=plugin) from exc
        if caller.spec is not None and caller.spec.opts.get("firstresult"):
            return result
        return result[0] if result else None

    def each(
        self,
        hook: str,
        kwargs_for: Callable[[str], dict[str, Any]],
        skip: Collection[str] = (),
    ) -> Iterator[tuple[str, Any]]:
        """Each implementer's answer to a collection hook, in registration order (plugins in
        ``skip`` are not called at all)."""
        for plugin in self.implementers(hook):
            if plugin not in skip:
                yield plugin, self.call_one(hook, plugin, kwargs_for(plugin))

    def first(
        self, hook: str, kwargs_for: Callable[[str], dict[str, Any]]
    ) -> tuple[Any, str] | None:
        """The first non-``None`` answer to a first-result hook and who gave it, asking the
        latest-registered plugin first as pluggy does."""
        for plugin in reversed(self.implementers(hook)):
            answer = self.call_one(hook, plugin, kwargs_for(plugin))
            if answer is not None:
                return answer, plugin
        return None

"""What a ``lamina_wrap_assembly`` wrapper sees: the request, this call's overrides, the config
and a read-only view of the kernel (plugin settings, fit strategies, model info).

The contract imports only the data model and records, never the engine that runs it.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from attrs import define, evolve, field, frozen, validators

from lamina.model.request import AssemblyRequest
from lamina.records import FitStrategy, ModelInfo

if TYPE_CHECKING:
    from lamina.config import LaminaConfig

_non_negative = validators.optional(validators.ge(0))


def _read_only(mapping: Mapping[str, Any]) -> Mapping[str, Any]:
    return MappingProxyType(dict(mapping))


@frozen(kw_only=True)
class Overrides:
    """Per-call overrides of ``[fit] strategy``, ``[fit] minimum_recent``,
    ``[budget] reserve_response`` and ``[report] verbose`` (``None``: the config's value)."""

    strategy: str | None = None
    minimum_recent: int | None = field(default=None, validator=_non_negative)
    reserve_response: int | None = field(default=None, validator=_non_negative)
    verbose_report: bool | None = None


@frozen(kw_only=True)
class KernelView:
    """A read-only view of the resolved kernel: each plugin's validated settings, the fit
    strategies by name, and the model info the budget is planned with."""

    settings: Mapping[str, Any] = field(converter=_read_only)
    strategies: Mapping[str, FitStrategy] = field(converter=_read_only)
    model_info: Callable[[str], ModelInfo]


@define(kw_only=True)
class AssemblyCall:
    """One assembly in flight. Wrappers may replace ``request`` and ``overrides`` before the
    pipeline runs; ``config`` and ``kernel`` are read-only."""

    request: AssemblyRequest
    config: LaminaConfig
    kernel: KernelView
    overrides: Overrides = field(factory=Overrides)
    _engine: Any = field(default=None, alias="engine", repr=False)

    def settings(self, plugin: str) -> Any:
        """The validated settings of ``plugin`` (``None`` when it takes or has none)."""
        return self.kernel.settings.get(plugin)

    def model_info(self, model: str | None = None) -> ModelInfo:
        """What the kernel knows of ``model`` (default: the request's)."""
        return self.kernel.model_info(model or self.request.model)

    # The 0.1 shape of the overrides, kept as views on ``overrides``.

    @property
    def strategy(self) -> str | None:
        return self.overrides.strategy

    @strategy.setter
    def strategy(self, value: str | None) -> None:
        self.overrides = evolve(self.overrides, strategy=value)

    @property
    def minimum_recent(self) -> int | None:
        return self.overrides.minimum_recent

    @minimum_recent.setter
    def minimum_recent(self, value: int | None) -> None:
        self.overrides = evolve(self.overrides, minimum_recent=value)

    @property
    def reserve_response(self) -> int | None:
        return self.overrides.reserve_response

    @reserve_response.setter
    def reserve_response(self, value: int | None) -> None:
        self.overrides = evolve(self.overrides, reserve_response=value)

    @property
    def assembler(self) -> Any:
        """Deprecated since 0.2 (removed in 1.0): use ``config``, ``settings()``,
        ``model_info()`` and ``kernel.strategies``."""
        warnings.warn(
            "AssemblyCall.assembler is deprecated and goes in Lamina 1.0; use call.config, "
            "call.settings(name), call.model_info(model) or call.kernel.strategies",
            DeprecationWarning,
            stacklevel=2,
        )
        return self._engine

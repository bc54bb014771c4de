"""Plan: before anything is gathered, the model's budget (limit less reserves, capped by the
request) and the tools the caller may have, with what their definitions cost."""

from __future__ import annotations

import operator
from datetime import datetime

from attrs import evolve

from lamina.assembly.state import InFlight, ResolvedModel
from lamina.assembly.tool_json import counted_json
from lamina.call import Overrides
from lamina.config import LaminaConfig, reserves
from lamina.errors import ConfigError
from lamina.model.budget import TokenBudget
from lamina.model.request import AssemblyRequest, Tool
from lamina.plugins import Registry
from lamina.records import ToolFilter


def plan(
    request: AssemblyRequest,
    overrides: Overrides,
    model: ResolvedModel,
    config: LaminaConfig,
    registry: Registry,
    now: datetime,
) -> InFlight:
    """The plan phase: a new in-flight state with its budget and tools."""
    info, counter = model.info, model.counter
    revision = getattr(model.tokenizer, "revision", None)
    if revision != model.revision[0]:  # its counts changed: forget the memoized ones
        model.revision[0] = revision
        counter.clear()
        model.tool_costs.clear()
    warnings = []
    if info.assumed:
        warnings.append(
            f"model {request.model!r} is not known to any plugin; assuming a context window "
            f"of {info.context_window} tokens"
        )
    cap = request.max_tokens or config.budget.max_tokens
    budget = model.budgets.get((overrides.reserve_response, cap))
    if budget is None:
        budget = _budget(request, overrides, model, config, cap)
        if len(model.budgets) >= 64:
            model.budgets.clear()
        model.budgets[overrides.reserve_response, cap] = budget
    tools: tuple[Tool, ...] = ()
    if config.tools or request.tools:
        filters: list[ToolFilter] = [a.record for a in registry.tool_filters]
        offered: dict[str, Tool] = {t.name: t for t in config.tools}
        offered.update({t.name: t for t in request.tools})
        tools = tuple(t for t in offered.values() if all(f.allows(t, request) for f in filters))
    return InFlight(
        request=request,
        overrides=overrides,
        model=model,
        budget=budget,
        now=now,
        tools=tools,
        tool_tokens=tool_tokens(model, tools),
        warnings=warnings,
    )


def _budget(
    request: AssemblyRequest,
    overrides: Overrides,
    model: ResolvedModel,
    config: LaminaConfig,
    cap: int | None,
) -> TokenBudget:
    """The budget for the model's limit less the reserves, capped by ``cap`` (made once per
    model, reserve override and cap: a ``TokenBudget`` is frozen)."""
    info = model.info
    budget_cfg = config.budget
    if overrides.reserve_response is not None:
        budget_cfg = evolve(budget_cfg, reserve_response=overrides.reserve_response)
    reserve_response, reserve_tools = reserves(budget_cfg, info.context_window, info.max_output)
    try:
        return TokenBudget.plan(
            model_limit=info.context_window,
            reserve_response=reserve_response,
            reserve_tools=reserve_tools,
            cap=cap,
        )
    except ValueError as exc:
        raise ConfigError(
            f"{exc} (model {request.model!r}); lower the reserves",
            file=config.where,
            key=config.key("budget"),
        ) from exc


def tool_tokens(model: ResolvedModel, tools: tuple[Tool, ...]) -> int:
    """What the tool definitions cost: the provider's own count when the model info has one,
    else each tool's JSON (name, description, input schema). Kept for the same tool objects
    (a host passes the same tools each request), until the tokenizer's counts change."""
    if not tools:
        return 0
    key = tuple(map(id, tools))
    found = model.tool_costs.get(key)
    if found is not None and all(map(operator.is_, found[0], tools)):
        return found[1]
    if model.info.tool_tokens is not None:
        cost = model.info.tool_tokens(tools, model.tokenizer)
    else:
        cost = sum(model.counter.count(counted_json(t)) for t in tools)
    if len(model.tool_costs) >= 64:
        model.tool_costs.clear()
    model.tool_costs[key] = (tools, cost)  # the tools kept alive, so their ids stay theirs
    return cost

"""The innermost ``lamina_wrap_assembly``: runs the pipeline. Wrappers from other plugins
surround it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from lamina.hookspecs import hookimpl

if TYPE_CHECKING:
    from lamina.model import AssembledContext
    from lamina.pipeline import AssemblyCall


@hookimpl(trylast=True)
def lamina_wrap_assembly(call: AssemblyCall) -> AssembledContext:
    return call.assembler.run(
        call.request,
        strategy=call.strategy,
        minimum_recent=call.minimum_recent,
        reserve_response=call.reserve_response,
    )

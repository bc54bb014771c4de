"""``LayerProvider(inline=True)``: a provider that only computes runs on the assembling thread
(no thread hop), and fails the way a pooled one does: an optional one is left out with a
warning, a required one stops the assembly naming the plugin."""

from __future__ import annotations

import threading

import pytest

import lamina
from lamina import Block, LayerProvider, ProviderError
from lamina.testing import make_assembler


class Inline:
    def __init__(self, provide, *, required=False):
        self.provide, self.required = provide, required

    @lamina.hookimpl
    def lamina_layer_providers(self):
        return [
            LayerProvider(name="inline", provide=self.provide, required=self.required, inline=True)
        ]


def test_an_inline_provider_runs_on_the_assembling_thread():
    seen = []

    def provide(ctx):
        seen.append(threading.current_thread())
        return [Block.text("note", "memory", "a note")]

    a = make_assembler({"model": "gpt-4o"}, plugins=[("inline", Inline(provide))])
    ctx = a.assemble(a.request("q"))
    assert seen == [threading.current_thread()]
    assert "a note" in ctx.current_message.text
    kernel = {p.record.name: p.record.inline for p in a.registry.providers}
    assert kernel["event"] and kernel["history"]


def test_an_inline_provider_fails_like_a_pooled_one():
    def broken(ctx):
        raise RuntimeError("db down")

    optional = make_assembler({"model": "gpt-4o"}, plugins=[("inline", Inline(broken))])
    ctx = optional.assemble(optional.request("q"))
    assert any(
        "layer provider 'inline' raised RuntimeError: db down" in w for w in ctx.report.warnings
    )
    required = make_assembler(
        {"model": "gpt-4o"}, plugins=[("inline", Inline(broken, required=True))]
    )
    with pytest.raises(ProviderError, match="plugin 'inline'.*db down"):
        required.assemble(required.request("q"))

"""``LayerProvider(from_memory=...)``: a provider that holds the answer in memory gives it on
the assembling thread (no thread hop); when it answers ``None``, ``provide`` runs on the pool
within its time limit as always; a ``from_memory`` that raises fails like ``provide``. The
static provider answers from memory when no block is read from a file."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

import lamina
from lamina import Block, LayerProvider, ProviderError
from lamina.testing import make_assembler


class Remembering:
    """A provider whose ``from_memory`` gives ``held`` (or raises it) and whose ``provide``
    records the thread it ran on, then sleeps ``delay`` seconds."""

    def __init__(self, held, *, delay=0.0, timeout=None, required=False):
        self.held, self.delay, self.timeout, self.required = held, delay, timeout, required
        self.asked: list[threading.Thread] = []
        self.provided: list[threading.Thread] = []

    def _from_memory(self, ctx):
        self.asked.append(threading.current_thread())
        if isinstance(self.held, Exception):
            raise self.held
        return self.held

    def _provide(self, ctx):
        self.provided.append(threading.current_thread())
        time.sleep(self.delay)
        return [Block.text("read", "memory", "read from the database")]

    @lamina.hookimpl
    def lamina_layer_providers(self):
        return [
            LayerProvider(
                name="remembering",
                provide=self._provide,
                from_memory=self._from_memory,
                required=self.required,
                timeout=self.timeout,
            )
        ]


def test_an_answer_from_memory_is_given_on_the_assembling_thread_and_nothing_is_read():
    p = Remembering([Block.text("held", "memory", "held in memory")])
    a = make_assembler({"model": "gpt-4o"}, plugins=[("remembering", p)])
    ctx = a.assemble(a.request("q"))
    assert p.asked == [threading.current_thread()] and p.provided == []
    assert "held in memory" in ctx.current_message.text
    assert [b.id for b in ctx.report.blocks if b.plugin == "remembering"] == ["held"]


def test_no_answer_from_memory_reads_on_the_pool_within_the_time_limit():
    p = Remembering(None)
    a = make_assembler({"model": "gpt-4o"}, plugins=[("remembering", p)])
    ctx = a.assemble(a.request("q"))
    assert len(p.asked) == 1 and len(p.provided) == 1
    assert p.provided[0] is not threading.current_thread()
    assert "read from the database" in ctx.current_message.text
    hung = Remembering(None, delay=2.0, timeout=0.2)  # a read that hangs is still cut off
    b = make_assembler({"model": "gpt-4o"}, plugins=[("remembering", hung)])
    started = time.monotonic()
    ctx = b.assemble(b.request("q"))
    assert time.monotonic() - started < 1.5
    assert any("'remembering' timed out after 0.2s" in w for w in ctx.report.warnings)


def test_a_from_memory_that_raises_fails_like_provide():
    optional = Remembering(RuntimeError("cache broken"))
    a = make_assembler({"model": "gpt-4o"}, plugins=[("remembering", optional)])
    ctx = a.assemble(a.request("q"))
    assert optional.provided == []
    assert any("raised RuntimeError: cache broken" in w for w in ctx.report.warnings)
    required = Remembering(RuntimeError("cache broken"), required=True)
    b = make_assembler({"model": "gpt-4o"}, plugins=[("remembering", required)])
    with pytest.raises(ProviderError, match="plugin 'remembering'.*cache broken"):
        b.assemble(b.request("q"))


def test_blocks_from_memory_are_checked_like_any_other():
    p = Remembering([Block.text("x", "no-such-layer", "text")])
    a = make_assembler({"model": "gpt-4o"}, plugins=[("remembering", p)])
    ctx = a.assemble(a.request("q"))
    assert any("unknown layer 'no-such-layer'" in w for w in ctx.report.warnings)


def test_static_blocks_are_given_from_memory_unless_one_is_a_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    from lamina.builtins import static_plugin

    text_only = {"model": "gpt-4o", "blocks": [{"id": "rules", "layer": "workspace", "text": "Hi"}]}
    a = make_assembler(text_only)
    record = next(p.record for p in a.registry.providers if p.record.name == "static")
    assert record.from_memory is static_plugin.from_memory
    made: list[threading.Thread] = []
    provide, read = static_plugin.provide, static_plugin._read_regular

    def spy(ctx):
        made.append(threading.current_thread())
        return provide(ctx)

    monkeypatch.setattr(static_plugin, "provide", spy)
    assert "Hi" in a.assemble(a.request("q")).system_prompt
    assert made == [threading.current_thread()]  # computed here, not on the pool
    (tmp_path / "rules.md").write_text("From a file.")
    reads: list[threading.Thread] = []

    def spy_read(path):
        reads.append(threading.current_thread())
        return read(path)

    monkeypatch.setattr(static_plugin, "_read_regular", spy_read)
    rules = {"id": "rules", "layer": "workspace", "file": str(tmp_path / "rules.md")}
    b = make_assembler({"model": "gpt-4o", "blocks": [rules]})
    assert "From a file." in b.assemble(b.request("q")).system_prompt
    assert len(reads) == 1 and reads[0] is not threading.current_thread()  # on the pool


def test_static_text_blocks_are_made_once_per_config() -> None:
    from lamina.builtins import static_plugin

    config = {"model": "gpt-4o", "blocks": [{"id": "rules", "layer": "workspace", "text": "Hi"}]}
    a, b = make_assembler(config), make_assembler(dict(config, session="other"))
    record = next(p.record for p in a.registry.providers if p.record.name == "static")
    made = []
    for assembler in (a, a, b):
        ctx = assembler.assemble(assembler.request("q"))
        assert "Hi" in ctx.system_prompt
        made.append(static_plugin._made[(id(assembler.config), "static")][1])
    assert made[0] is made[1]  # the same block objects on every request
    assert made[2] is not made[0] and made[2] == made[0]  # another config makes its own
    assert record.from_memory is static_plugin.from_memory

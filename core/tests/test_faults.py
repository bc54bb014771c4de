"""Faults a long-running host meets: hung providers, framing that would refuse a history that
can be cut, hostile text. Each test reproduces a defect found by probing from outside."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading

import pytest

import lamina
from lamina import Block, LayerProvider, hookimpl
from lamina.testing import StaticProvider, make_assembler


class Hangs:
    """An optional provider stuck forever (a network call with no timeout, say)."""

    def __init__(self, release: threading.Event) -> None:
        self.release = release

    @hookimpl
    def lamina_layer_providers(self):
        def provide(ctx):
            self.release.wait()
            return []

        return [LayerProvider(name="hangs", provide=provide, timeout=0.2)]


def test_a_hung_provider_cannot_exhaust_the_pool_of_a_long_running_assembler():
    release = threading.Event()
    before = threading.active_count()
    a = make_assembler({"model": "gpt-4o"}, plugins=[("hangs", Hangs(release))])
    try:
        for i in range(30):  # more than any fixed pool would have threads
            ctx = a.assemble(a.request(f"turn {i}"))
            assert f"turn {i}" in ctx.current_message.text
            assert any("hangs" in w for w in ctx.report.warnings)
        # Calls still stuck from earlier requests are not stacked up without bound: two hung
        # calls at most, and a few workers for the other providers.
        assert threading.active_count() - before <= 12
        assert any("still running 2 calls" in w for w in ctx.report.warnings)
    finally:
        release.set()
        a.close()


def test_nothing_waits_for_a_hung_provider_at_exit():
    script = textwrap.dedent(
        """
        import threading
        from lamina import LayerProvider, hookimpl
        from lamina.testing import make_assembler

        class Hangs:
            @hookimpl
            def lamina_layer_providers(self):
                forever = threading.Event()
                return [LayerProvider(name="hangs", provide=lambda ctx: forever.wait(),
                                      timeout=0.2)]

        a = make_assembler({"model": "gpt-4o"}, plugins=[("hangs", Hangs())])
        print(a.assemble(a.request("hi")).report.warnings[0])
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=True
    )
    assert "timed out" in done.stdout


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_a_block_file_that_is_a_fifo_is_a_clear_error_not_a_hang(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    config = tmp_path / "lamina.toml"
    config.write_text('[[blocks]]\nid = "f"\nlayer = "workspace"\nfile = "pipe"\n')
    a = lamina.Assembler.from_config(config, entry_points=False)
    with pytest.raises(lamina.ConfigError, match="not a regular file") as caught:
        a.assemble(a.request("hi"))
    assert caught.value.key == "blocks[0].file"


def history(n: int) -> list[Block]:
    return [
        Block.text(
            f"h{i}", "session", "ok", role="user" if i % 2 == 0 else "assistant", group=f"t{i // 2}"
        )
        for i in range(n)
    ]


@pytest.mark.parametrize(("messages", "minimum_recent"), [(400, 4), (1000, 4), (1000, 0)])
def test_framing_is_charged_only_for_history_that_is_kept(messages, minimum_recent):
    a = make_assembler(
        {"model": "gpt-4o", "fit": {"minimum_recent": minimum_recent}},
        plugins=[("hist", StaticProvider(history(messages)))],
        entry_points=True,
    )
    ctx = a.assemble(a.request("hi", max_tokens=1000))
    kept = sum(1 for b in ctx.report.blocks if b.id.startswith("h") and b.status == "kept")
    assert ctx.token_budget.used.total <= 1000
    # Each kept "ok" costs its token plus the message framing; most of the budget is used.
    assert kept >= 150

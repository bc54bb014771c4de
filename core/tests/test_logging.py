"""Diagnostics through ``logging`` under the ``lamina`` logger (plugin load failures, provider
timeouts and failures, budget refusals), never configured by the library, sent to standard
error by the CLI at ``--log-level``; and the progress line, quiet off a terminal."""

from __future__ import annotations

import io
import logging
import os
import subprocess
import sys
import textwrap
import threading

import pytest

import lamina
from lamina import Block
from lamina.config import parse_config
from lamina.errors import LaminaWarning
from lamina.log import Progress, get_logger
from lamina.plugins import PluginHost
from lamina.testing import FakeModel, StaticProvider, make_assembler


def records(caplog, name):
    return [r for r in caplog.records if r.name == name]


# -- the library emits ------------------------------------------------------------------------


def test_a_provider_timeout_is_logged_and_kept_in_the_report(caplog):
    release = threading.Event()

    def stuck(ctx):
        release.wait(30)  # past its limit: the assembly moves on without it
        return []

    a = make_assembler(plugins=[("slow", StaticProvider(stuck, name="search", timeout=0.01))])
    try:
        with caplog.at_level(logging.DEBUG, logger="lamina"):
            ctx = a.assemble(a.request("hi"))
    finally:
        release.set()
        a.close()
    (record,) = records(caplog, "lamina.assembly")
    assert record.levelno == logging.WARNING
    assert "'slow'" in record.getMessage() and "timed out after 0.01s" in record.getMessage()
    assert any("timed out after 0.01s" in w for w in ctx.report.warnings)


def test_a_provider_failure_is_logged_with_its_exception(caplog):
    def broken(ctx):
        raise ConnectionError("backend down")

    a = make_assembler(plugins=[("flaky", StaticProvider(broken, name="search"))])
    with a, caplog.at_level(logging.DEBUG, logger="lamina"):
        ctx = a.assemble(a.request("hi"))
    (record,) = records(caplog, "lamina.assembly")
    assert record.levelno == logging.WARNING and "backend down" in record.getMessage()
    assert isinstance(record.exc_info[1], ConnectionError)
    assert any("backend down" in w for w in ctx.report.warnings)


def test_a_required_providers_failure_is_logged_and_raised(caplog):
    def broken(ctx):
        raise ConnectionError("backend down")

    a = make_assembler(plugins=[("vital", StaticProvider(broken, name="rules", required=True))])
    with (
        a,
        caplog.at_level(logging.DEBUG, logger="lamina"),
        pytest.raises(lamina.ProviderError, match="backend down"),
    ):
        a.assemble(a.request("hi"))
    (record,) = records(caplog, "lamina.assembly")
    assert record.levelno == logging.INFO and "the assembly fails" in record.getMessage()


def test_a_budget_refusal_is_logged_and_raised(caplog):
    big = Block.text("rules", "workspace", "word " * 400, required=True)
    a = make_assembler(
        {"model": "fake-model"}, plugins=[("fake", FakeModel()), ("f", StaticProvider([big]))]
    )
    with (
        a,
        caplog.at_level(logging.DEBUG, logger="lamina"),
        pytest.raises(lamina.BudgetError) as refused,
    ):
        a.assemble(a.request("hi", max_tokens=100))
    (record,) = records(caplog, "lamina.assembly")
    assert record.levelno == logging.INFO
    assert record.getMessage() == f"assembly refused: {refused.value}"


class _InvalidPlugin:
    @lamina.hookimpl
    def lamina_layer_providers(self, no_such_argument):
        return []


def test_an_invalid_plugin_is_logged_as_skipped(caplog):
    with caplog.at_level(logging.DEBUG, logger="lamina"), pytest.warns(LaminaWarning):
        host = PluginHost(parse_config({}, file=None), extra=[("bad", _InvalidPlugin())])
    assert host.infos["bad"].error
    (record,) = records(caplog, "lamina.plugins")
    assert record.levelno == logging.WARNING
    assert "plugin 'bad'" in record.getMessage() and "skipped" in record.getMessage()


def test_a_plugin_whose_import_fails_is_logged(tmp_path, monkeypatch, caplog):
    site = tmp_path / "site"
    site.mkdir()
    (site / "broken_plugin.py").write_text("raise ImportError('needs libfoo')\n")
    info = site / "lamina_broken-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: lamina-broken\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[lamina]\nbroken = broken_plugin\n")
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.setenv("LAMINA_PLUGINS", "lamina-broken")
    with caplog.at_level(logging.DEBUG, logger="lamina"), pytest.warns(LaminaWarning):
        PluginHost(parse_config({}, file=None))
    (record,) = records(caplog, "lamina.plugins")
    assert record.levelno == logging.WARNING
    assert "'broken' (lamina-broken) skipped: import failed" in record.getMessage()
    assert "needs libfoo" in record.getMessage()


def test_the_library_configures_no_handler():
    """Only a NullHandler on ``lamina``: with logging unconfigured, a failed provider prints
    nothing (Python's last-resort handler would print the warning otherwise)."""
    assert [type(h) for h in get_logger().handlers] == [logging.NullHandler]
    code = textwrap.dedent(
        """
        from lamina.testing import StaticProvider, make_assembler
        def broken(ctx):
            raise RuntimeError("backend down")
        a = make_assembler(plugins=[("flaky", StaticProvider(broken))])
        with a:
            ctx = a.assemble(a.request("hi"))
        print(len(ctx.report.warnings))
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert (out.stdout, out.stderr) == ("1\n", "")


# -- the command line routes them -------------------------------------------------------------


def lamina_cli(*args, cwd, **env):
    return subprocess.run(
        [sys.executable, "-m", "lamina", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env={**os.environ, "LAMINA_PLUGINS": "", **env},
        timeout=120,
    )


@pytest.fixture
def refused(tmp_path):
    """A config whose required block cannot fit in 5 tokens: the assembly is refused."""
    (tmp_path / "lamina.toml").write_text(
        'model = "gpt-4o"\n[[blocks]]\nid = "rules"\nrequired = true\n'
        'text = "Always answer in French, whatever language the question is in."\n'
    )
    return ("assemble", "-m", "hi", "--max-tokens", "5"), tmp_path


def test_cli_shows_warnings_only_by_default(refused):
    args, cwd = refused
    out = lamina_cli(*args, cwd=cwd)
    assert out.returncode == 3
    assert out.stderr.startswith("lamina: error:") and "assembly refused" not in out.stderr


@pytest.mark.parametrize("how", ["option", "environment"])
def test_cli_log_level_shows_more(refused, how):
    args, cwd = refused
    if how == "option":
        out = lamina_cli("--log-level", "INFO", *args, cwd=cwd)
    else:
        out = lamina_cli(*args, cwd=cwd, LAMINA_LOG_LEVEL="info")
    assert out.returncode == 3
    lines = out.stderr.splitlines()
    assert lines[0].startswith("lamina: info: assembly refused:")
    assert lines[1].startswith("lamina: error:")


def test_cli_refuses_an_unknown_log_level(refused):
    args, cwd = refused
    out = lamina_cli(*args, cwd=cwd, LAMINA_LOG_LEVEL="loud")
    assert out.returncode == 2 and "--log-level" in out.stderr and "loud" in out.stderr
    assert "Traceback" not in out.stderr


def test_cli_logging_is_undone_when_the_command_ends(refused, monkeypatch):
    """Run in-process (as a host's test suite would), the CLI leaves ``lamina``'s handlers and
    level as it found them."""
    from click.testing import CliRunner

    from lamina.cli import cli

    args, cwd = refused
    monkeypatch.chdir(cwd)
    before = (list(get_logger().handlers), get_logger().level)
    result = CliRunner().invoke(cli, ["--log-level", "debug", *args])
    assert result.exit_code == 3
    assert (list(get_logger().handlers), get_logger().level) == before


# -- progress ---------------------------------------------------------------------------------


class _Terminal(io.StringIO):
    def isatty(self):
        return True


class _Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


def test_progress_is_silent_when_not_a_terminal(caplog):
    stream = io.StringIO()
    with (
        caplog.at_level(logging.DEBUG, logger="lamina"),
        Progress("memory import", total=3, unit="chunks", stream=stream) as p,
    ):
        for _ in p.iterate(range(3)):
            pass
    assert stream.getvalue() == "" and p.done == 3
    (summary,) = records(caplog, "lamina.progress")
    assert summary.getMessage().startswith("memory import: 3 chunks in ")


def test_progress_shows_items_and_rate_on_a_terminal():
    stream, clock = _Terminal(), _Clock()
    with Progress("ledger import", total=10, unit="turns", stream=stream, clock=clock) as p:
        clock.now += 2.0
        p.advance(3)
        clock.now += 0.05  # within the redraw interval: not drawn
        p.advance(1)
        clock.now += 1.95
        p.advance(2)
    frames = stream.getvalue().split("\r")[1:]
    assert frames == [
        "lamina: ledger import: 3 of 10 turns, 1.5/s",
        "lamina: ledger import: 6 of 10 turns, 1.5/s",
        "lamina: ledger import: 6 of 10 turns, 1.5/s\n",
    ]


def test_progress_pads_over_a_longer_previous_line():
    stream, clock = _Terminal(), _Clock()
    p = Progress("embedding", stream=stream, clock=clock, interval=0)
    clock.now += 1
    p.advance(12000)
    clock.now += 1000
    p.advance(1)
    p.close()
    p.close()  # closing twice ends the line once
    first, second, last = stream.getvalue().split("\r")[1:]
    assert first == "lamina: embedding: 12,000 items, 12,000.0/s"
    assert second.rstrip() == "lamina: embedding: 12,001 items, 12.0/s"
    assert len(second) == len(first) and last.endswith("\n") and last.count("\n") == 1


def test_progress_of_a_resumed_job_rates_only_this_runs_work():
    stream, clock = _Terminal(), _Clock()
    with Progress("import", total=100, unit="rows", start=40, stream=stream, clock=clock) as p:
        clock.now += 2.0
        p.update(50)
    assert stream.getvalue().split("\r")[1:] == [
        "lamina: import: 50 of 100 rows, 5.0/s",
        "lamina: import: 50 of 100 rows, 5.0/s\n",
    ]


def test_progress_rates_a_second_count_and_learns_its_total():
    stream, clock = _Terminal(), _Clock()
    p = Progress("m.jsonl", unit="memories", rate_unit="embeddings", stream=stream, clock=clock)
    p.update(0)  # nothing embedded yet: no rate
    clock.now += 4.0
    p.update(256, rated=200, total=257)
    p.advance(1, rated=2)
    p.close()
    assert stream.getvalue().split("\r")[1:] == [
        "lamina: m.jsonl: 0 memories",
        "lamina: m.jsonl: 256 of 257 memories, 50.0 embeddings/s",
        "lamina: m.jsonl: 257 of 257 memories, 50.5 embeddings/s\n",
    ]


def test_show_overrides_the_terminal_check():
    forced = io.StringIO()
    with Progress("x", stream=forced, show=True, clock=_Clock()) as p:
        p.advance()
    assert forced.getvalue() == "\rlamina: x: 1 items" * 2 + "\n"
    silenced = _Terminal()
    with Progress("x", stream=silenced, show=False) as p:
        p.advance()
    assert silenced.getvalue() == ""


def test_progress_is_public_api():
    assert lamina.progress is lamina.log.progress and lamina.Progress is Progress
    bar = lamina.progress("job", total=3, unit="files", rate_unit="bytes", start=1, show=False)
    assert (bar.total, bar.unit, bar.rate_unit, bar.done, bar.shown) == (
        3,
        "files",
        "bytes",
        1,
        False,
    )


def test_cli_prints_no_progress_into_a_pipe(tmp_path):
    (tmp_path / "lamina.toml").write_text('model = "gpt-4o"\n')
    out = lamina_cli("assemble", "-m", "hi", cwd=tmp_path)
    assert out.returncode == 0 and out.stderr == ""

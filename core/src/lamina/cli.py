"""The ``lamina`` command line. Imports stay inside commands so ``lamina --help`` is instant."""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING, Any, NoReturn

import click

from lamina.cli_options import config_option
from lamina.serve.command import serve as serve_command

if TYPE_CHECKING:
    from lamina.errors import LaminaError

EXIT_OK, EXIT_USAGE, EXIT_BUDGET = 0, 2, 3


class _Commands(click.Group):
    """The built-in commands at once; plugins' commands (``lamina_commands``) only when a
    name is not built in, so ``lamina --help`` and built-in commands import no plugin."""

    plugins_added = False

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        found = super().get_command(ctx, cmd_name)
        if found is None and not self.plugins_added:
            self.plugins_added = True
            _add_plugin_commands()
            found = super().get_command(ctx, cmd_name)
        return found


@click.group(
    cls=_Commands,
    context_settings={"help_option_names": ["-h", "--help"]},
    epilog="Installed plugins add more commands (the ledger's `lamina ledger`, memory's "
    "`lamina memory`, …): `lamina COMMAND --help` loads and describes them.",
)
@click.version_option(package_name="lamina", prog_name="lamina")
@click.option(
    "--log-level",
    type=click.Choice(["debug", "info", "warning", "error", "critical"], case_sensitive=False),
    default="warning",
    show_default=True,
    envvar="LAMINA_LOG_LEVEL",
    help="Diagnostics (the `lamina` logger) at this level and above go to standard error "
    "[env LAMINA_LOG_LEVEL].",
)
@click.pass_context
def cli(ctx: click.Context, log_level: str) -> None:
    """Assemble the context an LLM sees each turn, within its token budget."""
    import warnings

    from lamina.errors import LaminaWarning
    from lamina.log import configure_cli

    ctx.call_on_close(configure_cli(log_level.lower()))
    ctx.with_resource(warnings.catch_warnings())
    warnings.simplefilter("ignore", LaminaWarning)  # logged under lamina.plugins instead


def _fail(exc: LaminaError) -> NoReturn:
    click.echo(f"lamina: error: {exc}", err=True)
    sys.exit(exc.exit_code)


def _read_stdin() -> str:
    """Standard input as UTF-8 whatever the locale; undecodable bytes become U+FFFD."""
    return sys.stdin.buffer.read().decode("utf-8", "replace")


def _progress(phase: str) -> None:
    click.echo(f"lamina: {phase}…", err=True)


@cli.command()
@config_option
@click.option("--message", "-m", help="The event content (default: read from standard input).")
@click.option("--model", help="Model name (default: from config).")
@click.option("--role", type=click.Choice(["manager", "worker", "unified"]), help="Agent role.")
@click.option("--task", help="A worker's task: the instructions it was spawned with.")
@click.option(
    "--task-file",
    type=click.Path(exists=True, dir_okay=False),
    help="Read the worker's task from this UTF-8 file instead.",
)
@click.option(
    "--scope",
    "scope",
    multiple=True,
    help="A tool or Nexus capability (name, category or glob) a worker may use (repeatable; "
    "default: those its task names).",
)
@click.option("--session", help="Session label.")
@click.option(
    "--max-tokens", type=click.IntRange(min=1), help="Cap the tokens available to the context."
)
@click.option(
    "--time", "event_time", help="Event time (ISO 8601) instead of now, for reproducible output."
)
@click.option(
    "--permission",
    "permissions",
    multiple=True,
    help="A permission granted to the caller (repeatable).",
)
@click.option(
    "--provider", help="Provider adapter for --format payload (default: the model's provider)."
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["json", "text", "report", "payload", "html"]),
    default="json",
    show_default=True,
)
@click.option(
    "--show-report", is_flag=True, help="With --format text: print the report after the context."
)
def assemble(
    config_path: str | None,
    message: str | None,
    model: str | None,
    role: str | None,
    task: str | None,
    task_file: str | None,
    scope: tuple[str, ...],
    session: str | None,
    max_tokens: int | None,
    event_time: str | None,
    permissions: tuple[str, ...],
    provider: str | None,
    fmt: str,
    show_report: bool,
) -> None:
    """Assemble one turn's context and print it."""
    from datetime import UTC, datetime

    from lamina.assembly.engine import Assembler
    from lamina.errors import LaminaError
    from lamina.reporting import dump_yaml, render_text, report_document
    from lamina.serde import to_json

    if message is None:
        if sys.stdin.isatty():
            raise click.UsageError("give --message or pipe the event content on standard input")
        message = _read_stdin()
    fields: dict[str, Any] = {}
    if event_time is not None:
        try:
            fields["time"] = datetime.fromisoformat(event_time)
            fields["time"].astimezone(UTC)  # a time the clock can represent in UTC
        except (ValueError, OverflowError) as exc:
            raise click.BadParameter(
                f"not an ISO 8601 time between years 1 and 9999 in UTC: {event_time!r}",
                param_hint="--time",
            ) from exc
    for key, value in (
        ("model", model),
        ("role", role),
        ("session_label", session),
        ("max_tokens", max_tokens),
    ):
        if value is not None:
            fields[key] = value
    if permissions:
        fields["permissions"] = permissions
    fields.update(_worker_fields(task, task_file, scope))
    try:
        assembler = Assembler.from_config(
            config_path, progress=_progress if sys.stderr.isatty() else None
        )
        with assembler:
            request = assembler.request(message, **fields)
            if request.role != "worker" and (task is not None or task_file or scope):
                raise click.UsageError(
                    "--task, --task-file and --scope describe a worker: add --role worker"
                )
            ctx = assembler.assemble(request)
            payload = assembler.payload(ctx, provider) if fmt == "payload" else None
    except LaminaError as exc:
        _fail(exc)
    if payload is not None:
        click.echo(json.dumps(payload, indent=2, ensure_ascii=False))
    elif fmt == "json":
        click.echo(to_json(ctx, indent=2))
    elif fmt == "html":
        from lamina.html import render_html

        click.echo(render_html(ctx), nl=False)
    elif fmt == "report":
        click.echo(dump_yaml(report_document(ctx)), nl=False)
    else:
        click.echo(render_text(ctx))
        if show_report:
            click.echo()
            click.echo(dump_yaml(report_document(ctx)), nl=False)


def _worker_fields(
    task: str | None, task_file: str | None, scope: tuple[str, ...]
) -> dict[str, Any]:
    """The request fields of a worker's options: its task (text or file) and its scope (the
    tools and Nexus capabilities it may use, as request metadata)."""
    fields: dict[str, Any] = {}
    if task is not None and task_file is not None:
        raise click.UsageError("give --task or --task-file, not both")
    if task_file is not None:
        try:
            with open(task_file, "rb") as f:
                task = f.read().decode("utf-8")
        except OSError as exc:
            raise click.BadParameter(
                f"cannot read {task_file}: {exc.strerror}", param_hint="--task-file"
            ) from exc
        except UnicodeDecodeError as exc:
            raise click.BadParameter(
                f"{task_file} is not UTF-8 text (byte {exc.object[exc.start]:#04x} at offset "
                f"{exc.start})",
                param_hint="--task-file",
            ) from exc
    if task is not None:
        if not task.strip():
            raise click.BadParameter("a worker's task may not be empty", param_hint="--task")
        fields["task"] = task
    if scope:
        fields["metadata"] = {"tool_scope": list(scope), "nexus_scope": list(scope)}
    return fields


@cli.command()
@config_option
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def plugins(config_path: str | None, as_json: bool) -> None:
    """List plugins: name, version, hooks, built-in or installed, load errors."""
    import warnings

    from lamina.config import load_config
    from lamina.errors import LaminaError, LaminaWarning
    from lamina.plugins import PluginHost
    from lamina.serde import unstructure

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", LaminaWarning)  # shown in the listing instead
            host = PluginHost(load_config(config_path))
    except LaminaError as exc:
        _fail(exc)
    infos = sorted(host.infos.values(), key=lambda i: (not i.builtin, i.name))
    if as_json:
        click.echo(json.dumps([unstructure(i) for i in infos], indent=2))
        return
    for info in infos:
        kind = "built-in" if info.builtin else "installed"
        head = f"{info.name} {info.version} ({info.distribution}, {kind})"
        click.echo(head)
        if info.error:
            click.echo(f"    ERROR: {info.error}")
        else:
            click.echo(f"    hooks: {', '.join(info.hooks) or '-'}")


@cli.command()
@click.argument("source", type=click.File("rb"), default="-")
@click.option(
    "--model", default=None, help="Count with this model's tokenizer (default: from config)."
)
@config_option
@click.option("--json", "as_json", is_flag=True)
def tokens(source: Any, model: str | None, config_path: str | None, as_json: bool) -> None:
    """Count the tokens of FILE (or standard input) and say which tokenizer counted."""
    from lamina.assembly.engine import Assembler
    from lamina.errors import LaminaError

    text = source.read().decode("utf-8", "replace")
    try:
        with Assembler.from_config(config_path) as assembler:
            name = model or assembler.config.model
            tok = assembler.model(name).tokenizer
            count = tok.count(text)
    except LaminaError as exc:
        _fail(exc)
    if as_json:
        click.echo(
            json.dumps({"tokens": count, "model": name, "tokenizer": tok.name, "exact": tok.exact})
        )
    else:
        kind = "exact" if tok.exact else "estimate"
        click.echo(f"{count} tokens ({tok.name}, {kind}) for model {name}")


cli.add_command(serve_command)  # only click is imported until `lamina serve` runs


def main() -> None:
    """Entry point: adds plugins' commands (``lamina_commands``), then runs the CLI.

    A Lamina error is one line and its exit code; anything else unexpected is one line too
    (exit 1), with the traceback only when ``LAMINA_DEBUG=1``.
    """
    import os

    from lamina.errors import LaminaError

    try:
        code = cli(prog_name="lamina", standalone_mode=False)
    except click.exceptions.Abort:
        click.echo("lamina: aborted", err=True)
        sys.exit(1)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except LaminaError as exc:
        _fail(exc)
    except Exception as exc:
        if os.environ.get("LAMINA_DEBUG", "") not in ("", "0"):
            raise
        click.echo(
            f"lamina: internal error: {type(exc).__name__}: {exc} (LAMINA_DEBUG=1 shows where)",
            err=True,
        )
        sys.exit(1)
    if isinstance(code, int) and code:  # a command that ended with ctx.exit(code)
        sys.exit(code)


def run() -> NoReturn:
    """The console script (``lamina``, ``python -m lamina``): ``main()``, then the process
    ends without the interpreter's teardown (freeing every module and a tokenizer's ranks
    takes about a tenth of a second), through ``_end``.

    Generated code (attrs' and cattrs' methods) is compiled once and kept in Lamina's cache
    directory (``lamina._compiled``). Library callers (tests, embedding code) call ``main()``,
    which does neither and only raises ``SystemExit``.
    """
    from lamina._compiled import install

    install()
    try:
        main()
    except SystemExit as exc:
        _end(exc.code)
    _end(0)


def _end(code: str | int | None) -> NoReturn:
    """End the process as ``sys.exit(code)`` would, minus the teardown: exit handlers run
    (``atexit``: logging, pools, temporary folders), standard output and error are flushed,
    then ``os._exit``. The ordinary ``sys.exit`` when other non-daemon threads still run (the
    interpreter would wait for them) or flushing fails (a closed pipe: Python reports it)."""
    import atexit
    import os
    import threading

    status = 0 if code is None else code if isinstance(code, int) else 1
    current = threading.current_thread()
    waiting = any(t is not current and not t.daemon for t in threading.enumerate())
    if (
        waiting
        or current is not threading.main_thread()
        or not -(2**31) <= status < 2**31
        or not _flushed()
    ):
        sys.exit(code)
    if not isinstance(code, int | None):  # sys.exit("message"): on standard error, status 1
        print(code, file=sys.stderr)
    atexit._run_exitfuncs()
    os._exit(status if _flushed() else 120)  # 120: what Python exits with when flushing fails


def _flushed() -> bool:
    """Flush standard output and error; ``False`` when either fails."""
    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is not None:
                stream.flush()
        except Exception:
            return False
    return True


def _add_plugin_commands() -> None:
    import warnings

    from lamina.config import LaminaConfig
    from lamina.errors import LaminaError, LaminaWarning
    from lamina.plugins import PluginHost

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", LaminaWarning)
            PluginHost(LaminaConfig()).add_commands(cli)
    except LaminaError as exc:
        click.echo(f"lamina: warning: plugin commands unavailable: {exc}", err=True)

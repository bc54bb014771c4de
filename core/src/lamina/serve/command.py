"""The ``lamina serve`` command. Only click is imported here; the service, Starlette and
uvicorn load when the command runs."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

import click

from lamina.cli_options import config_option

if TYPE_CHECKING:
    import socket

    import uvicorn

DEFAULT_HOST, DEFAULT_PORT = "127.0.0.1", 8642


@click.command()
@config_option
@click.option("--host", default=DEFAULT_HOST, show_default=True, help="Address to listen on.")
@click.option(
    "--port",
    default=DEFAULT_PORT,
    show_default=True,
    type=click.IntRange(0, 65535),
    help="Port (0: any free one; the line on standard output says which).",
)
@click.option(
    "--token-file",
    type=click.Path(dir_okay=False),
    help="File holding the bearer token clients must send (default: $LAMINA_SERVE_TOKEN). "
    "Required to listen on any address but loopback.",
)
@click.option("--store", help="Session store to use when several are installed.")
@click.option(
    "--max-body",
    default=8 * 1024 * 1024,
    show_default=True,
    type=click.IntRange(min=1024),
    help="Largest request body in bytes (413 beyond).",
)
def serve(
    config_path: str | None,
    host: str,
    port: int,
    token_file: str | None,
    store: str | None,
    max_body: int,
) -> None:
    """Serve assembly over HTTP/JSON for hosts in any language (see docs/serve.md).

    Holds one warm assembler and the session store (the ledger) for its whole life:
    POST /v1/assemble, POST /v1/sessions/LABEL/turns, POST /v1/sessions/LABEL/compact,
    GET /v1/sessions/LABEL/stats, GET /v1/health, GET /v1/plugins, GET /v1/schema,
    GET /openapi.json.
    """
    from lamina.errors import LaminaError

    try:
        server, sock = _prepare(config_path, host, port, token_file, store, max_body)
    except LaminaError as exc:
        click.echo(f"lamina: error: {exc}", err=True)
        sys.exit(exc.exit_code)
    except OSError as exc:
        click.echo(f"lamina: error: cannot listen on {host}:{port}: {exc.strerror}", err=True)
        sys.exit(2)
    bound = sock.getsockname()
    shown = f"[{bound[0]}]" if ":" in bound[0] else bound[0]
    click.echo(f"lamina: serving on http://{shown}:{bound[1]}", err=False)
    sys.stdout.flush()
    server.run(sockets=[sock])


def _prepare(
    config_path: str | None,
    host: str,
    port: int,
    token_file: str | None,
    store: str | None,
    max_body: int,
) -> tuple[uvicorn.Server, socket.socket]:
    """The uvicorn server and its bound socket; refuses before loading anything when the
    address is not loopback and there is no token."""
    import socket

    from lamina.errors import ConfigError
    from lamina.serve.security import load_token, require_token_off_loopback

    token = load_token(token_file)
    require_token_off_loopback(host, token)

    try:
        import uvicorn

        from lamina.serve.app import configure_logging, create_app
    except ImportError as exc:
        raise ConfigError(
            f"lamina serve needs Starlette and uvicorn ({exc.name} is missing): "
            "pip install 'lamina[serve]'"
        ) from exc
    from lamina.assembly.engine import Assembler
    from lamina.serve.service import Service

    assembler = Assembler.from_config(config_path)
    try:
        service = Service(assembler, store)
        service.warm()
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        # IPPROTO_TCP named, so asyncio sets TCP_NODELAY on each connection (it checks the
        # protocol): without it a reply's headers and body meet Nagle and delayed ACKs (40 ms).
        sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((host.strip("[]"), port))
            sock.listen(2048)
        except OSError:
            sock.close()
            raise
    except BaseException:
        assembler.close()
        raise
    configure_logging()
    app = create_app(service, token=token, max_body=max_body)
    config = uvicorn.Config(app, lifespan="on", log_level="warning", access_log=False)
    server = uvicorn.Server(config)
    _settle()
    return server, sock


def _settle() -> None:
    """Leave what is loaded and warmed now (modules, plugins, the assembler, models, caches),
    which lives as long as the service, out of the garbage collector's reach: a full
    collection then walks only what requests made, instead of about a million long-lived
    objects (about 45 ms each time, measured in a process holding the memory plugin's model,
    one request in forty)."""
    import gc

    gc.collect()
    gc.freeze()

"""Who may talk to ``lamina serve``, over real sockets with real ``lamina serve`` processes:
loopback by default, a bearer token required (and checked) anywhere else, loopback ``Host``
names only without a token, and clear refusals instead of an open service."""

from __future__ import annotations

import gc
import os
import selectors
import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from lamina import ConfigError
from lamina.serve.security import is_loopback, load_token, require_token_off_loopback

TOKEN = "s3cret-token-0123456789abcdef"


def command(*args: str) -> list[str]:
    return [sys.executable, "-m", "lamina", "serve", *args]


def environment(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "LAMINA_SERVE_TOKEN"}
    env["LAMINA_PLUGINS"] = ""  # the kernel alone: these tests are about the door
    return {**env, **extra}


@pytest.fixture
def config(tmp_path: Path) -> str:
    path = tmp_path / "lamina.toml"
    path.write_text('model = "gpt-4o"\n', encoding="utf-8")
    return str(path)


@contextmanager
def serving(*args: str, env: dict[str, str] | None = None) -> Iterator[str]:
    """A ``lamina serve`` process on a free port; yields its URL (from its ready line)."""
    proc = subprocess.Popen(
        command("--port", "0", *args),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env or environment(),
    )
    try:
        assert proc.stdout is not None
        with selectors.DefaultSelector() as sel:
            sel.register(proc.stdout, selectors.EVENT_READ)
            ready = sel.select(timeout=60)
        line = proc.stdout.readline() if ready else ""
        if "serving on" not in line:
            proc.kill()
            _, err = proc.communicate(timeout=30)
            pytest.fail(f"lamina serve did not start: {line!r} {err}")
        yield line.strip().rsplit(" ", 1)[1]
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def refused(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        command(*args), capture_output=True, text=True, env=env or environment(), timeout=60
    )


def port_of(url: str) -> int:
    return int(url.rsplit(":", 1)[1])


# -- where it listens ------------------------------------------------------------------------


def test_it_listens_on_loopback_by_default(config):
    with serving("--config", config) as url:
        assert url.startswith("http://127.0.0.1:")
        assert httpx.get(f"{url}/v1/health").json()["status"] == "ok"


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.0.2.10", "example.com"])
def test_any_other_address_without_a_token_is_refused_before_listening(config, host):
    done = refused("--config", config, "--host", host)
    assert done.returncode == 2
    assert f"refusing to listen on {host} without a bearer token" in done.stderr
    assert "--token-file" in done.stderr and "Traceback" not in done.stderr
    assert done.stdout == ""


def test_a_port_in_use_is_a_clear_error(config):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = refused("--config", config, "--port", str(port))
    assert done.returncode == 2 and f"cannot listen on 127.0.0.1:{port}" in done.stderr


# -- the token ---------------------------------------------------------------------------------


def test_off_loopback_every_request_needs_the_token(config, tmp_path):
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n", encoding="utf-8")
    with serving("--config", config, "--host", "0.0.0.0", "--token-file", str(token_file)) as url:
        local = f"http://127.0.0.1:{port_of(url)}"
        for path in ("/v1/health", "/openapi.json", "/v1/schema", "/v1/plugins"):
            missing = httpx.get(local + path)
            assert missing.status_code == 401, path
            assert missing.headers["www-authenticate"].startswith("Bearer")
            assert missing.headers["content-type"] == "application/problem+json"
        wrong = httpx.get(f"{local}/v1/health", headers={"Authorization": f"Bearer {TOKEN}x"})
        assert wrong.status_code == 401 and wrong.json()["detail"] == "wrong bearer token"
        posted = httpx.post(f"{local}/v1/assemble", json={"message": "hi"})
        assert posted.status_code == 401
        auth = {"Authorization": f"Bearer {TOKEN}"}
        assert httpx.get(f"{local}/v1/health", headers=auth).status_code == 200
        ok = httpx.post(f"{local}/v1/assemble", json={"message": "hi"}, headers=auth)
        assert ok.status_code == 200
        # With a token the Host header is not the guard: any name reaches it.
        named = httpx.get(f"{local}/v1/health", headers={**auth, "Host": "lamina.internal"})
        assert named.status_code == 200


def test_the_token_may_come_from_the_environment(config):
    with serving("--config", config, env=environment(LAMINA_SERVE_TOKEN=TOKEN)) as url:
        assert httpx.get(f"{url}/v1/health").status_code == 401
        auth = {"Authorization": f"Bearer {TOKEN}"}
        assert httpx.get(f"{url}/v1/health", headers=auth).status_code == 200


@pytest.mark.parametrize(
    ("content", "message"),
    [("short", "at least 16 characters"), ("has a space in it!!", "without spaces")],
)
def test_a_weak_or_malformed_token_is_refused(config, tmp_path, content, message):
    token_file = tmp_path / "token"
    token_file.write_text(content, encoding="utf-8")
    done = refused("--config", config, "--token-file", str(token_file))
    assert done.returncode == 2 and message in done.stderr


def test_an_unreadable_token_file_is_a_clear_error(config, tmp_path):
    done = refused("--config", config, "--token-file", str(tmp_path / "missing"))
    assert done.returncode == 2
    assert "cannot read the token file" in done.stderr and "missing" in done.stderr


# -- without a token: loopback names only -------------------------------------------------------


def test_without_a_token_only_loopback_host_names_are_answered(config):
    with serving("--config", config) as url:
        port = port_of(url)
        for host in (f"127.0.0.1:{port}", f"localhost:{port}", "localhost", f"[::1]:{port}"):
            assert httpx.get(f"{url}/v1/health", headers={"Host": host}).status_code == 200
        for host in (f"evil.example:{port}", "attacker.test", f"127.0.0.1.nip.io:{port}"):
            rebound = httpx.get(f"{url}/v1/health", headers={"Host": host})
            assert rebound.status_code == 403, host
            assert rebound.json()["type"] == "urn:lamina:problem:forbidden-host"


# -- the rules themselves ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1", True),
        ("127.8.9.10", True),
        ("::1", True),
        ("[::1]", True),
        ("localhost", True),
        ("LOCALHOST", True),
        ("0.0.0.0", False),
        ("::", False),
        ("10.0.0.1", False),
        ("localhost.example.com", False),
        ("my-host", False),
    ],
)
def test_what_counts_as_loopback(host, loopback):
    assert is_loopback(host) is loopback


def test_the_token_file_wins_over_the_environment(tmp_path):
    token_file = tmp_path / "token"
    token_file.write_text(f"  {TOKEN}\n", encoding="utf-8")
    env = {"LAMINA_SERVE_TOKEN": "another-token-0123456789"}
    assert load_token(str(token_file), env) == TOKEN
    assert load_token(None, env) == "another-token-0123456789"
    assert load_token(None, {}) is None and load_token(None, {"LAMINA_SERVE_TOKEN": " "}) is None


def test_loopback_needs_no_token_and_elsewhere_does():
    require_token_off_loopback("127.0.0.1", None)
    require_token_off_loopback("0.0.0.0", TOKEN)
    with pytest.raises(ConfigError, match="refusing to listen on 0.0.0.0"):
        require_token_off_loopback("0.0.0.0", None)


def test_the_listening_socket_names_tcp_so_each_connection_gets_no_delay(config):
    """asyncio sets TCP_NODELAY only on sockets whose protocol is IPPROTO_TCP; without it a
    reply's headers and body wait on Nagle and delayed ACKs (about 40 ms a request)."""
    from lamina.serve.command import _prepare

    server, sock = _prepare(config, "127.0.0.1", 0, None, None, 1 << 20)
    try:
        assert sock.proto == socket.IPPROTO_TCP
        assert server.config.lifespan == "on"
    finally:
        sock.close()
        gc.unfreeze()


def test_what_the_service_loaded_is_left_out_of_full_collections(config):
    """Modules, plugins and warm caches live as long as the service: frozen once it is ready,
    so a full collection walks only what requests made."""
    from lamina.serve.command import _prepare

    gc.unfreeze()
    _server, sock = _prepare(config, "127.0.0.1", 0, None, None, 1 << 20)
    try:
        assert gc.get_freeze_count() > 10_000
    finally:
        sock.close()
        gc.unfreeze()

"""Hostile input gets a clear error or is made safe, never a traceback: broken config, text
that cannot be encoded, plugins that misbehave."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

import lamina
from lamina import Block, Tool
from lamina.testing import StaticProvider, make_assembler

LAMINA = [sys.executable, "-m", "lamina"]


def lamina_cli(*args: str, stdin: bytes = b"", cwd=None) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [*LAMINA, *args], input=stdin, capture_output=True, timeout=120, cwd=cwd, check=False
    )


@pytest.mark.parametrize(
    ("toml", "says"),
    [
        (b"\xff\xfe\x00binary", "not UTF-8 text"),
        (
            b'[[blocks]]\nid = "a"\ntext = "x"\n[[blocks]]\nid = "a"\ntext = "y"\n',
            "has the id 'a' twice: at blocks[0] and blocks[1] at key blocks",
        ),
        (b'[fit]\nmarker = "{oops"\n', "at key fit.marker"),
        (b'[fit]\nmarker = "{count:>300000000}"\n', "may only use {count}"),
        (b'[fit]\nmarker = "{count.__class__}"\n', "may only use {count}"),
    ],
    ids=["binary", "duplicate-block-id", "unclosed-brace", "huge-width", "attribute"],
)
def test_broken_config_is_one_line_naming_file_and_key(tmp_path, toml, says):
    (tmp_path / "lamina.toml").write_bytes(toml)
    done = lamina_cli("assemble", "-c", "lamina.toml", "-m", "hi", cwd=tmp_path)
    err = done.stderr.decode()
    assert done.returncode == 2, err
    assert says in err and "lamina.toml" in err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_an_unrepresentable_time_is_a_usage_error():
    done = lamina_cli("assemble", "-m", "hi", "--time", "0001-01-01T00:00:00+14:00")
    assert done.returncode == 2
    assert b"--time" in done.stderr and b"Traceback" not in done.stderr


def test_invalid_bytes_on_stdin_never_reach_the_json():
    done = lamina_cli("assemble", "--format", "json", stdin=b"hi \xff\xfe \xed\xa0\x80 there")
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout.decode("utf-8"))  # strict UTF-8: would fail on a surrogate
    assert "hi" in out["current_message"]["content"][0]["text"]


surrogate_text = st.lists(
    st.one_of(st.characters(), st.sampled_from(["\ud800", "\udfff", "\ud83d\ude00"]))
).map("".join)


@given(event=surrogate_text, body=surrogate_text, description=surrogate_text)
def test_lone_surrogates_are_replaced_so_every_output_encodes(event, body, description):
    blocks = [
        Block.text("m", "memory", body, title=body[:20] or None),
        Block.text("h", "session", body, role="user"),
    ]
    a = make_assembler(plugins=[("s", StaticProvider(blocks))])
    request = a.request(event, tools=(Tool(name="t", description=description),))
    ctx = a.assemble(request)
    lamina.to_json(ctx).encode("utf-8")
    json.dumps(lamina.unstructure(ctx), ensure_ascii=False).encode("utf-8")


def test_a_valid_surrogate_pair_becomes_its_character():
    assert lamina.TextPart(text="a\ud83d\ude00b").text == "a😀b"
    assert lamina.TextPart(text="a\ud800b").text == "a\ufffdb"


class BadFormatter:
    def __init__(self, render) -> None:
        self.render = render

    @lamina.hookimpl
    def lamina_formatters(self):
        return [lamina.Formatter(name="bad", render=self.render)]


@pytest.mark.parametrize(
    ("render", "says"),
    [(lambda block: 1 / 0, "raised ZeroDivisionError"), (lambda block: 42, "returned int")],
    ids=["raises", "not-text"],
)
def test_a_formatter_that_misbehaves_is_a_plugin_error_naming_it(render, says):
    a = make_assembler(
        {"format": {"system": "bad"}},
        plugins=[
            ("badfmt", BadFormatter(render)),
            ("s", StaticProvider([Block.text("w", "workspace", "rules")])),
        ],
    )
    with pytest.raises(lamina.PluginError, match=says) as caught:
        a.assemble(a.request("hi"))
    assert caught.value.plugin == "badfmt"


def test_an_unexpected_error_in_the_cli_is_one_line_without_a_traceback(tmp_path):
    plugin = tmp_path / "boom_plugin.py"
    plugin.write_text(
        "import lamina\n"
        "@lamina.hookimpl\n"
        "def lamina_commands(cli):\n"
        "    @cli.command()\n"
        "    def boom():\n"
        "        raise RuntimeError('kaput')\n"
    )
    script = (
        "import sys, boom_plugin\n"
        "from lamina import cli\n"
        "cli.cli.add_command  # the group exists\n"
        "boom_plugin.lamina_commands(cli.cli)\n"
        "sys.argv = ['lamina', 'boom']\n"
        "cli.main()\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, cwd=tmp_path, timeout=60
    )
    assert done.returncode == 1
    assert "internal error: RuntimeError: kaput" in done.stderr
    assert "Traceback" not in done.stderr


def _load_yaml(text: str, version: str) -> object:
    from ruamel.yaml import YAML

    return YAML(typ="safe", pure=True).load(f"%YAML {version}\n---\n{text}")


yaml_text = st.text(st.characters(exclude_categories=("Cs",)))


@given(key=yaml_text, value=yaml_text, items=st.lists(yaml_text, max_size=4))
def test_the_yaml_report_reads_back_exactly_in_yaml_1_1_and_1_2(key, value, items):
    from lamina.reporting import dump_yaml

    data = {"report": {key or "k": value, "list": items, "n": 3, "none": None, "flag": True}}
    text = dump_yaml(data)
    for version in ("1.1", "1.2"):
        assert _load_yaml(text, version) == data


@pytest.mark.parametrize(
    "value",
    ["on", "off", "yes", "=", "<<", ".inf", ".nan", ".5", "+1", "a\tb", "x\u2028y", "1_000", "~"],
)
def test_yaml_quotes_what_a_reader_would_take_for_something_else(value):
    from lamina.reporting import dump_yaml

    for version in ("1.1", "1.2"):
        assert _load_yaml(dump_yaml({"v": value}), version) == {"v": value}

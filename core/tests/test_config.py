"""Config files: lamina.toml and [tool.lamina], validation errors that name file, key, expectation."""

from __future__ import annotations

import pytest

from lamina import Assembler, ConfigError, SerdeError
from lamina.config import find_config, load_config


def write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    return path


def test_lamina_toml_is_read(tmp_path):
    path = write(tmp_path, "lamina.toml", 'model = "gpt-4"\n[fit]\nstrategy = "rollingWindow"\n')
    config = load_config(path)
    assert config.model == "gpt-4" and config.fit.strategy == "rollingWindow"
    assert config.path == str(path.resolve())


def test_tool_lamina_in_pyproject_is_found_upwards(tmp_path, monkeypatch):
    write(tmp_path, "pyproject.toml", '[project]\nname="x"\n[tool.lamina]\nmodel = "o3"\n')
    sub = tmp_path / "a" / "b"
    sub.mkdir(parents=True)
    monkeypatch.chdir(sub)
    assert find_config() == tmp_path / "pyproject.toml"
    assert load_config().model == "o3"


def test_pyproject_without_tool_lamina_is_skipped(tmp_path, monkeypatch):
    write(tmp_path, "pyproject.toml", '[project]\nname="x"\n')
    monkeypatch.chdir(tmp_path)
    assert find_config() is None
    assert load_config().model == "gpt-4o"  # defaults


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("[fit]\nstrategy = 3\n", ["expected a string", "key fit.strategy"]),
        ('[fit]\nstratgy = "x"\n', ["unknown keys ['stratgy']", "key fit"]),
        ("[budget]\nreserve_tools = -1\n", ["reserve_tools", ">= 0", "key budget"]),
        ('role = "boss"\n', ["boss", "key role"]),
        ('[[blocks]]\nid = "a"\n', ["exactly one of text or file", "key blocks[0]"]),
        ("[plugins]\nledger = 3\n", ["expected a table of settings", "key plugins.ledger"]),
        ("model = \n", ["not valid TOML"]),
    ],
)
def test_errors_name_the_file_the_key_and_what_was_expected(tmp_path, text, expected):
    path = write(tmp_path, "lamina.toml", text)
    with pytest.raises(ConfigError) as info:
        load_config(path)
    message = str(info.value)
    assert str(path.name) in message
    for part in expected:
        assert part in message


def test_pyproject_errors_use_the_full_key(tmp_path):
    path = write(tmp_path, "pyproject.toml", '[tool.lamina.fit]\nminimum_recent = "four"\n')
    with pytest.raises(SerdeError, match="key tool.lamina.fit.minimum_recent"):
        load_config(path)


def test_unknown_names_are_caught_when_the_assembler_is_built(tmp_path):
    for text, key in [
        ('[fit]\nstrategy = "rollingwindow"\n', "fit.strategy"),
        ('[format]\nsystem = "html"\n', "format.system"),
        ("[layers.memroy]\nmax_tokens = 10\n", "layers.memroy"),
        ('[[blocks]]\nid = "a"\ntext = "x"\ntruncation = "centre"\n', "blocks[0].truncation"),
        ('[[blocks]]\nid = "a"\ntext = "x"\nlayer = "soul"\n', "blocks[0].layer"),
    ]:
        path = write(tmp_path, "lamina.toml", text)
        with pytest.raises(ConfigError) as info:
            Assembler.from_config(path, entry_points=False)
        assert key in str(info.value) and "lamina.toml" in str(info.value)
        assert "known:" in str(info.value)


def test_static_file_blocks_resolve_next_to_the_config(tmp_path):
    (tmp_path / "rules.md").write_text("Be brief.")
    path = write(tmp_path, "lamina.toml", '[[blocks]]\nid = "r"\nfile = "rules.md"\n')
    a = Assembler.from_config(path, entry_points=False)
    assert "Be brief." in a.assemble(a.request("hi")).system_prompt


def test_missing_static_file_names_file_and_key(tmp_path):
    path = write(tmp_path, "lamina.toml", '[[blocks]]\nid = "r"\nfile = "nope.md"\n')
    a = Assembler.from_config(path, entry_points=False)
    with pytest.raises(
        ConfigError, match=r"lamina\.toml, key blocks\[0\]\.file: cannot read .*nope\.md"
    ):
        a.assemble(a.request("hi"))

"""Plugin loading: built-ins, entry points from installed distributions, allow/deny lists,
failures reported without stopping the others, duplicates named with both distributions."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from lamina import PluginError, SerdeError
from lamina.config import parse_config
from lamina.errors import LaminaWarning
from lamina.plugins import BUILTINS, PluginHost

PROVIDER_PLUGIN = """
import attrs
import lamina

@attrs.frozen(kw_only=True)
class Settings:
    greeting: str = "hello"

@lamina.hookimpl
def lamina_settings_class():
    return Settings

@lamina.hookimpl
def lamina_layer_providers(settings):
    def provide(ctx):
        yield lamina.Block.text("{name}:greeting", "memory", ctx.settings.greeting)
    return [lamina.LayerProvider(name="{name}", provide=provide)]
"""


def install_distribution(
    site: Path, dist: str, entry_points: dict[str, str], modules: dict[str, str]
) -> None:
    """Install a minimal distribution into ``site`` the way an installer lays it out."""
    site.mkdir(parents=True, exist_ok=True)
    for module, source in modules.items():
        (site / f"{module}.py").write_text(textwrap.dedent(source))
    info = site / f"{dist.replace('-', '_')}-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 1.0\n")
    lines = "".join(f"{name} = {target}\n" for name, target in entry_points.items())
    (info / "entry_points.txt").write_text(f"[lamina]\n{lines}")
    # Only what a test installs is loaded, whatever else the environment has installed.
    allowed = [n for n in os.environ.get("LAMINA_PLUGINS", "").split(",") if n]
    os.environ["LAMINA_PLUGINS"] = ",".join([*allowed, dist])


@pytest.fixture
def site(tmp_path, monkeypatch):
    path = tmp_path / "site"
    path.mkdir()
    monkeypatch.syspath_prepend(str(path))
    monkeypatch.setenv("LAMINA_PLUGINS", "")
    return path


def host(config=None, **kwargs) -> PluginHost:
    return PluginHost(parse_config(config or {}, file="lamina.toml"), **kwargs)


def test_builtins_are_ordinary_plugins():
    h = host(entry_points=False)
    assert [n for n, _ in BUILTINS] == [n for n in h.infos]
    assert all(i.builtin and i.distribution == "lamina" for i in h.infos.values())
    assert "lamina_tokenizer" in h.infos["tiktoken"].hooks


def test_installed_plugin_loads_with_its_settings(site):
    install_distribution(
        site,
        "lamina-greeter",
        {"greeter": "greeter_plugin"},
        {"greeter_plugin": PROVIDER_PLUGIN.replace("{name}", "greeter")},
    )
    h = host({"plugins": {"greeter": {"greeting": "bonjour"}}})
    assert h.infos["greeter"].distribution == "lamina-greeter"
    assert h.infos["greeter"].version == "1.0"
    assert h.settings["greeter"].greeting == "bonjour"
    from lamina import Assembler

    a = Assembler(parse_config({"plugins": {"greeter": {"greeting": "bonjour"}}}, file=None))
    assert "bonjour" in a.assemble(a.request("hi")).current_message.text


def test_plugin_whose_import_fails_is_reported_and_others_still_load(site):
    install_distribution(
        site,
        "lamina-broken",
        {"broken": "broken_plugin"},
        {"broken_plugin": "raise ImportError('needs libfoo')\n"},
    )
    install_distribution(
        site,
        "lamina-greeter",
        {"greeter": "greeter_plugin"},
        {"greeter_plugin": PROVIDER_PLUGIN.replace("{name}", "greeter")},
    )
    with pytest.warns(LaminaWarning, match="broken.*needs libfoo"):
        h = host()
    assert "needs libfoo" in h.infos["broken"].error
    assert h.infos["greeter"].error is None


def test_required_plugin_that_fails_stops_loading(site):
    install_distribution(
        site,
        "lamina-broken",
        {"broken": "broken_plugin"},
        {"broken_plugin": "raise ImportError('needs libfoo')\n"},
    )
    with pytest.raises(PluginError, match="'broken'.*needs libfoo.*plugins.require"):
        host({"plugins": {"require": ["broken"]}})


def test_required_plugin_that_is_missing_is_an_error():
    with pytest.raises(PluginError, match="'ghost'.*not installed"):
        host({"plugins": {"require": ["ghost"]}}, entry_points=False)


def test_allow_list_from_the_environment(site, monkeypatch):
    install_distribution(
        site,
        "lamina-greeter",
        {"greeter": "greeter_plugin"},
        {"greeter_plugin": PROVIDER_PLUGIN.replace("{name}", "greeter")},
    )
    install_distribution(
        site,
        "lamina-other",
        {"other": "other_plugin"},
        {"other_plugin": PROVIDER_PLUGIN.replace("{name}", "other")},
    )
    monkeypatch.setenv("LAMINA_PLUGINS", "lamina-greeter")  # by distribution name
    assert set(host().infos) - {n for n, _ in BUILTINS} == {"greeter"}
    monkeypatch.setenv("LAMINA_PLUGINS", "")
    assert set(host().infos) == {n for n, _ in BUILTINS}


def test_enable_and_disable_in_config(site):
    install_distribution(
        site,
        "lamina-greeter",
        {"greeter": "greeter_plugin"},
        {"greeter_plugin": PROVIDER_PLUGIN.replace("{name}", "greeter")},
    )
    assert "greeter" not in host({"plugins": {"disable": ["greeter"]}}).infos
    assert "static" not in host({"plugins": {"disable": ["static"]}}).infos
    only = host({"plugins": {"enable": ["greeter"]}}).infos
    assert "greeter" in only


def test_essential_builtins_cannot_be_disabled():
    with pytest.raises(PluginError, match="'layers'.*essential"):
        host({"plugins": {"disable": ["layers"]}}, entry_points=False)


def test_two_records_with_one_name_name_both_distributions(site):
    clash = PROVIDER_PLUGIN.replace("{name}", "same")
    install_distribution(site, "lamina-one", {"one": "one_plugin"}, {"one_plugin": clash})
    install_distribution(site, "lamina-two", {"two": "two_plugin"}, {"two_plugin": clash})
    with pytest.raises(PluginError, match="'same'.*lamina-one.*lamina-two"):
        host().resolve()


def test_bad_settings_name_the_file_and_key(site):
    install_distribution(
        site,
        "lamina-greeter",
        {"greeter": "greeter_plugin"},
        {"greeter_plugin": PROVIDER_PLUGIN.replace("{name}", "greeter")},
    )
    with pytest.raises(SerdeError) as info:
        host({"plugins": {"greeter": {"greting": "typo"}}})
    message = str(info.value)
    assert "lamina.toml" in message and "plugins.greeter" in message and "greting" in message


def test_section_for_an_unknown_plugin_is_an_error():
    with pytest.raises(PluginError, match="'ledgr'.*plugins.ledgr.*no such plugin"):
        host({"plugins": {"ledgr": {"path": "x.db"}}}, entry_points=False)


def test_a_record_of_the_wrong_type_names_the_plugin():
    class Bad:
        import lamina as _l

        @_l.hookimpl
        def lamina_truncators(self):
            return ["not a truncator"]

    h = host(entry_points=False, extra=[("bad", Bad())])
    with pytest.raises(PluginError, match="'bad'.*returned str, expected Truncator"):
        h.resolve()


def test_lamina_plugins_command_lists_installed_and_broken(site):
    install_distribution(
        site,
        "lamina-greeter",
        {"greeter": "greeter_plugin"},
        {"greeter_plugin": PROVIDER_PLUGIN.replace("{name}", "greeter")},
    )
    install_distribution(
        site,
        "lamina-broken",
        {"broken": "broken_plugin"},
        {"broken_plugin": "raise ImportError('needs libfoo')\n"},
    )
    env = {**os.environ, "PYTHONPATH": str(site)}
    out = subprocess.run(
        [sys.executable, "-m", "lamina", "plugins", "--json"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
        cwd=site,
    )
    listed = {p["name"]: p for p in json.loads(out.stdout)}
    assert listed["greeter"]["distribution"] == "lamina-greeter"
    assert listed["greeter"]["builtin"] is False
    assert "lamina_layer_providers" in listed["greeter"]["hooks"]
    assert "needs libfoo" in listed["broken"]["error"]
    assert listed["tiktoken"]["builtin"] is True


def test_section_for_a_plugin_without_settings_is_an_error():
    with pytest.raises(PluginError, match="'static': takes no settings.*plugins.static"):
        host({"plugins": {"static": {"x": 1}}}, entry_points=False)


def _settings_plugin(cls):
    """A plugin object whose settings class is ``cls``."""
    import lamina

    class Plugin:
        @lamina.hookimpl
        def lamina_settings_class(self):
            return cls

    return Plugin()


def test_without_a_section_a_plugin_gets_its_defaults_or_the_missing_field_named():
    import attrs

    @attrs.frozen(kw_only=True)
    class Defaults:
        greeting: str = "hello"
        times: int = attrs.field(default=2, validator=attrs.validators.ge(1))

    @attrs.frozen(kw_only=True)
    class Required:
        path: str

    extra = [("greeter", _settings_plugin(Defaults))]
    assert host(entry_points=False, extra=extra).settings["greeter"] == Defaults()
    with pytest.raises(SerdeError, match="required field missing") as info:
        host(entry_points=False, extra=[("needy", _settings_plugin(Required))])
    assert "plugins.needy" in str(info.value)

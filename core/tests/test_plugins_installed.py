"""The entry points' cache (``lamina.plugins._installed``): a start reads what is installed
from it without ``importlib.metadata``, and sees at once a distribution installed, changed or
removed since; a damaged, unwritable or turned-off cache only means asking again."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from lamina.config import parse_config
from lamina.plugins import PluginHost, _installed
from lamina.plugins._installed import installed

PLUGIN = """
import lamina

@lamina.hookimpl
def lamina_layer_providers():
    return [lamina.LayerProvider(name="{name}", provide=lambda ctx: [])]
"""


def install(site: Path, dist: str, points: dict[str, str]) -> Path:
    """A minimal distribution laid out as an installer does; its plugin modules too."""
    for target in points.values():
        module = target.partition(":")[0]
        (site / f"{module}.py").write_text(PLUGIN.format(name=module))
    info = site / f"{dist.replace('-', '_')}-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 1.0\n")
    lines = "".join(f"{name} = {target}\n" for name, target in points.items())
    (info / "entry_points.txt").write_text(f"[lamina]\n{lines}")
    return info


@pytest.fixture
def site(tmp_path, monkeypatch):
    path = tmp_path / "site"
    path.mkdir()
    monkeypatch.syspath_prepend(str(path))
    monkeypatch.setenv("LAMINA_CACHE_DIR", str(tmp_path / "cache"))
    return path


def names(group: str = "lamina") -> dict[str, tuple[str, str]]:
    return {ep.name: (ep.distribution, ep.value) for ep in installed(group, "lamina").entry_points}


def asked(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Records each time ``importlib.metadata`` is asked."""
    calls: list[str] = []
    real = _installed._ask

    def ask(group: str, kernel: str) -> _installed.Installed:
        calls.append(group)
        return real(group, kernel)

    monkeypatch.setattr(_installed, "_ask", ask)
    return calls


def test_the_second_start_reads_the_cache_and_gives_the_same(site, monkeypatch):
    install(site, "lamina-hello", {"hello": "hello_plugin:plugin"})
    calls = asked(monkeypatch)
    first = installed("lamina", "lamina")
    second = installed("lamina", "lamina")
    assert calls == ["lamina"]
    assert first == second
    assert "hello" in names() and first.kernel_version  # the kernel's own version
    assert first == _installed._ask("lamina", "lamina")


def test_a_distribution_installed_changed_or_removed_is_seen_at_once(site, monkeypatch):
    install(site, "lamina-one", {"one": "one_plugin"})
    assert names()["one"] == ("lamina-one", "one_plugin")
    info = install(site, "lamina-two", {"two": "two_plugin"})
    assert names()["two"] == ("lamina-two", "two_plugin")
    (info / "entry_points.txt").write_text("[lamina]\ntwo = two_plugin:other\n")
    assert names()["two"] == ("lamina-two", "two_plugin:other")
    shutil.rmtree(info)
    assert "two" not in names() and "one" in names()


def test_other_files_in_a_sys_path_folder_change_nothing(site, monkeypatch):
    """``python -m lamina`` puts the current folder on ``sys.path``: files made there (not
    distributions) keep the cached answer."""
    install(site, "lamina-one", {"one": "one_plugin"})
    calls = asked(monkeypatch)
    names()
    (site / "notes.txt").write_text("not a distribution")
    (site / "folder").mkdir()
    names()
    assert calls == ["lamina"]


def test_a_zip_on_sys_path_is_fingerprinted_by_its_stat(site, tmp_path, monkeypatch):
    import zipfile

    archive = tmp_path / "plugins.zip"
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr("zipped_plugin.py", PLUGIN.format(name="zipped_plugin"))
    monkeypatch.syspath_prepend(str(archive))
    assert "zipped" not in names()
    with zipfile.ZipFile(archive, "a") as z:
        info = "zipped-1.0.dist-info"
        z.writestr(f"{info}/METADATA", "Metadata-Version: 2.1\nName: zipped\nVersion: 1.0\n")
        z.writestr(f"{info}/entry_points.txt", "[lamina]\nzipped = zipped_plugin\n")
    assert names()["zipped"] == ("zipped", "zipped_plugin")


def test_a_distribution_seen_is_loaded_by_the_host(site, monkeypatch):
    monkeypatch.setenv("LAMINA_PLUGINS", "lamina-fresh")
    host = PluginHost(parse_config({}, file="lamina.toml"))
    assert "fresh" not in host.infos
    install(site, "lamina-fresh", {"fresh": "fresh_plugin"})
    host = PluginHost(parse_config({}, file="lamina.toml"))
    assert host.infos["fresh"].error is None
    assert host.infos["fresh"].distribution == "lamina-fresh"
    assert host.infos["fresh"].version == "1.0"


def test_another_sys_path_is_another_answer(site, tmp_path, monkeypatch):
    other = tmp_path / "other"
    other.mkdir()
    install(other, "lamina-elsewhere", {"elsewhere": "elsewhere_plugin"})
    assert "elsewhere" not in names()
    monkeypatch.syspath_prepend(str(other))
    assert "elsewhere" in names()


def _cache_files(root: Path) -> list[Path]:
    return list((root / "plugins").glob("entry-points-*.json"))


@pytest.mark.parametrize(
    "damage",
    [
        b"",
        b"{not json",
        b"[]",
        json.dumps({"format": 1, "fingerprint": "x", "kernel_version": 1}).encode(),
        json.dumps({"format": 2, "entries": "x"}).encode(),
        json.dumps({"format": 2, "entries": [1, None, {"fingerprint": []}]}).encode(),
    ],
)
def test_a_damaged_cache_is_ignored_and_written_again(site, tmp_path, monkeypatch, damage):
    install(site, "lamina-one", {"one": "one_plugin"})
    want = installed("lamina", "lamina")
    (path,) = _cache_files(tmp_path / "cache")
    data = json.loads(path.read_text())
    path.write_bytes(damage)
    calls = asked(monkeypatch)
    assert installed("lamina", "lamina") == want and calls == ["lamina"]
    assert json.loads(path.read_text()) == data


def test_a_forged_entry_with_the_right_fingerprint_but_wrong_types_is_refused(
    site, tmp_path, monkeypatch
):
    install(site, "lamina-one", {"one": "one_plugin"})
    want = installed("lamina", "lamina")
    (path,) = _cache_files(tmp_path / "cache")
    data = json.loads(path.read_text())
    data["entries"][0]["entry_points"] = [["one", 1, "lamina-one", "1.0"]]
    path.write_text(json.dumps(data))
    assert installed("lamina", "lamina") == want


def test_the_answers_for_a_few_sys_paths_are_kept_side_by_side(site, tmp_path, monkeypatch):
    """``lamina`` and ``python -m lamina`` (the current folder first on ``sys.path``) do not
    throw each other's answer away."""
    install(site, "lamina-one", {"one": "one_plugin"})
    calls = asked(monkeypatch)
    before = names()
    monkeypatch.syspath_prepend(str(tmp_path))
    names()
    sys.path.remove(str(tmp_path))
    assert names() == before
    monkeypatch.syspath_prepend(str(tmp_path))
    names()
    assert calls == ["lamina", "lamina"]
    for n in range(_installed.KEPT + 2):  # older answers make way for newer ones
        (tmp_path / f"p{n}").mkdir()
        monkeypatch.syspath_prepend(str(tmp_path / f"p{n}"))
        names()
    (path,) = _cache_files(tmp_path / "cache")
    assert len(json.loads(path.read_text())["entries"]) == _installed.KEPT


def test_without_a_writable_cache_every_start_asks(site, tmp_path, monkeypatch):
    install(site, "lamina-one", {"one": "one_plugin"})
    blocker = tmp_path / "file"
    blocker.write_text("where the cache folder would be")
    for root in (str(blocker), ""):
        monkeypatch.setenv("LAMINA_CACHE_DIR", root)
        calls = asked(monkeypatch)
        assert "one" in names() and "one" in names()
        assert calls == ["lamina", "lamina"]
    assert not (tmp_path / "cache").exists()


def test_another_distribution_finder_turns_the_cache_off(site, monkeypatch):
    class Finder:
        @staticmethod
        def find_spec(*args: object) -> None:
            return None

        @staticmethod
        def find_distributions(*args: object) -> list[object]:
            return []

    install(site, "lamina-one", {"one": "one_plugin"})
    monkeypatch.setattr(sys, "meta_path", [*sys.meta_path, Finder])
    calls = asked(monkeypatch)
    names()
    names()
    assert calls == ["lamina", "lamina"]


def test_an_entry_point_loads_its_module_or_attribute(site):
    (site / "pkg_target.py").write_text("class A:\n    class B:\n        value = 7\n")
    load = _installed.EntryPoint
    assert load(name="x", value="pkg_target", distribution="d", version="1").load().A.B.value == 7
    point = load(name="x", value="pkg_target : A.B [extra]", distribution="d", version="1")
    assert point.load().value == 7
    with pytest.raises(ValueError, match="not an entry point value"):
        load(name="x", value="not valid!", distribution="d", version="1").load()


def test_assemble_does_not_import_importlib_metadata_once_cached(tmp_path):
    (tmp_path / "lamina.toml").write_text('model = "gpt-4o"\n')
    code = (
        "import io, sys, contextlib; from lamina import cli\n"
        "sys.argv = ['lamina', 'assemble', '--config', sys.argv[1], '--format', 'text',\n"
        "            '--message', 'hello']\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "  try:\n    cli.main()\n  except SystemExit as exc:\n    assert not exc.code, exc.code\n"
        "print('METADATA', 'importlib.metadata' in sys.modules)"
    )
    env = {**os.environ, "LAMINA_CACHE_DIR": str(tmp_path / "cache")}
    runs = [
        subprocess.run(
            [sys.executable, "-c", code, str(tmp_path / "lamina.toml")],
            capture_output=True,
            text=True,
            timeout=120,
            env=env,
        )
        for _ in range(2)
    ]
    assert "METADATA True" in runs[0].stdout, runs[0].stdout + runs[0].stderr
    assert "METADATA False" in runs[1].stdout, runs[1].stdout + runs[1].stderr

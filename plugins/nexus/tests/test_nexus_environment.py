"""The Nexus environment: rendering, sources (file, command), degradation to warnings, caching."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from lamina_nexus import plugin as nexus_plugin
from lamina_nexus.render import render_environment
from lamina_nexus.snapshot import SnapshotError, parse_snapshot

from lamina import ConfigError
from lamina.testing import make_assembler

SNAPSHOT: dict[str, Any] = {
    "generated_at": "2026-01-14T09:50:00Z",
    "capabilities": [
        {"name": "email-send", "category": "Communication", "status": "ready"},
        {"name": "email-read", "category": "Communication", "status": "ready"},
        {
            "name": "chat-send",
            "category": "Communication",
            "status": "needs_setup",
            "reason": "no workspace",
        },
        {"name": "social-x", "category": "Social", "status": "broken", "reason": "token expired"},
        {"name": "news", "category": "Social", "status": "needs-setup", "reason": "needs API key"},
    ],
    "credentials": {"configured": 12, "broken": ["twitter"]},
}

EXPECTED = """\
You have the `nexus` CLI for skill discovery and credential management.

### Capabilities
Communication: email-read, email-send ✅ | chat-send 🔧 (needs setup: no workspace)
Social: news 🔧 (needs setup: needs API key) | social-x ❌ (broken: token expired)
(✅ ready · 🔧 needs setup · ❌ broken)

### Using Skills
Run `nexus skill use <name>` to get the full guide for any capability.

### Credentials
12 configured | 1 broken (twitter)"""


def write_snapshot(path: Path, data: Any) -> Path:
    path.write_text(json.dumps(data), "utf-8")
    return path


def assemble(section: dict[str, Any], **request: Any):  # type: ignore[no-untyped-def]
    a = make_assembler(
        {"model": "gpt-4o", "plugins": {"nexus": section}}, plugins=[("nexus", nexus_plugin)]
    )
    with a:
        return a.assemble(a.request("hi", **request))


def test_render_groups_by_category_with_status():
    snap = parse_snapshot(json.dumps(SNAPSHOT), source="s.json")
    assert render_environment(snap) == EXPECTED


def test_system_prompt_holds_the_environment(tmp_path):
    snap = write_snapshot(tmp_path / "s.json", SNAPSHOT)
    ctx = assemble({"snapshot": str(snap)})
    assert ctx.system_prompt == "## Nexus Environment\n\n" + EXPECTED
    assert ctx.report.warnings == ()


def test_credential_values_never_reach_the_prompt():
    data = dict(SNAPSHOT)
    data["credentials"] = [
        {"name": "gmail", "status": "ok", "value": "sk-live-SECRET1"},
        {"name": "twitter", "status": "broken", "token": "SECRET2"},
        {"service": "slack", "status": "ok", "secret": "SECRET3"},
    ]
    snap = parse_snapshot(json.dumps(data), source="s.json")
    text = render_environment(snap)
    assert "SECRET" not in text
    assert text.endswith("### Credentials\n2 configured | 1 broken (twitter)")


def test_names_cannot_inject_structure():
    data = {"capabilities": [{"name": "x\n## Obey", "category": "A\n\n# B", "status": "ready"}]}
    text = render_environment(parse_snapshot(json.dumps(data), source="s"))
    assert "\n## Obey" not in text and "\n# B" not in text
    assert "A # B: x ## Obey ✅" in text


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ("{not json", "not valid JSON"),
        ("[1, 2]", "expected a JSON object"),
        ({"capabilities": {"a": 1}}, r"\$\.capabilities: expected a list"),
        ({"capabilities": [{"name": "a", "status": "weird"}]}, r"\$\.capabilities\[0\]\.status"),
        ({"capabilities": [{"status": "ready"}]}, r"\$\.capabilities\[0\]\.name"),
        ({"credentials": {"configured": -1}}, r"\$\.credentials\.configured"),
    ],
)
def test_malformed_snapshot_degrades_to_a_warning(tmp_path, data, message):
    path = tmp_path / "s.json"
    path.write_text(data if isinstance(data, str) else json.dumps(data), "utf-8")
    with pytest.raises(SnapshotError, match=message):
        parse_snapshot(path.read_text(), source=str(path))
    ctx = assemble({"snapshot": str(path)})
    assert ctx.system_prompt == ""
    assert len(ctx.report.warnings) == 1
    warning = ctx.report.warnings[0]
    assert warning.startswith(
        "plugin 'nexus': layer provider 'nexus-environment' raised SnapshotError"
    )
    assert str(path) in warning and warning.endswith("its blocks were left out")


def test_missing_snapshot_file_is_a_warning(tmp_path):
    ctx = assemble({"snapshot": str(tmp_path / "absent.json")})
    assert "cannot read snapshot" in ctx.report.warnings[0]


def test_snapshot_from_a_command(tmp_path):
    code = f"import json; print(json.dumps({SNAPSHOT!r}))"
    ctx = assemble({"command": [sys.executable, "-c", code]})
    assert ctx.system_prompt == "## Nexus Environment\n\n" + EXPECTED


@pytest.mark.parametrize(
    ("section", "message"),
    [
        (
            {
                "command": [
                    sys.executable,
                    "-c",
                    "import sys; sys.stderr.write('nexus: not logged in\\n'); sys.exit(3)",
                ]
            },
            "exited with status 3: nexus: not logged in",
        ),
        (
            {"command": [sys.executable, "-c", "import time; time.sleep(30)"], "timeout": 0.3},
            "timed out after 0.3s",
        ),
        ({"command": ["/nonexistent/nexus-cli", "status"]}, "program not found"),
    ],
    ids=["fails", "times-out", "not-found"],
)
def test_a_command_that_does_not_answer_is_a_warning(section, message):
    ctx = assemble(section)
    assert ctx.system_prompt == ""
    assert message in ctx.report.warnings[0]


def test_regenerated_only_when_the_snapshot_hash_changes(tmp_path, monkeypatch):
    calls: list[str] = []
    real = nexus_plugin.render_environment

    def counting(snap, **kw):  # type: ignore[no-untyped-def]
        calls.append(snap.sha256)
        return real(snap, **kw)

    monkeypatch.setattr(nexus_plugin, "render_environment", counting)
    path = write_snapshot(tmp_path / "s.json", SNAPSHOT)
    a = make_assembler(
        {"plugins": {"nexus": {"snapshot": str(path)}}}, plugins=[("nexus", nexus_plugin)]
    )
    with a:
        first = a.assemble(a.request("one")).system_prompt
        a.assemble(a.request("two"))
        # Only the timestamp changes (and keys are reordered): same hash, no regeneration.
        write_snapshot(
            path, {**dict(reversed(SNAPSHOT.items())), "generated_at": "2026-02-01T00:00:00Z"}
        )
        assert a.assemble(a.request("three")).system_prompt == first
        assert len(calls) == 1
        changed = json.loads(json.dumps(SNAPSHOT))
        changed["capabilities"][3]["status"] = "ready"
        write_snapshot(path, changed)
        after = a.assemble(a.request("four")).system_prompt
    assert len(calls) == 2 and calls[0] != calls[1]
    assert "Social: social-x ✅ | news 🔧" in after


def test_worker_sees_the_capabilities_its_task_names(tmp_path):
    path = write_snapshot(tmp_path / "s.json", SNAPSHOT)
    ctx = assemble({"snapshot": str(path)}, role="worker", task="Draft with email-send, then stop")
    assert (
        "### Capabilities (scoped to your task)\nCommunication: email-send ✅\n"
        in ctx.system_prompt
    )
    ctx = assemble(
        {"snapshot": str(path)}, role="worker", task="x", metadata={"nexus_scope": ["Social"]}
    )
    assert "Social: news 🔧 (needs setup: needs API key) | social-x ❌" in ctx.system_prompt
    assert "Communication" not in ctx.system_prompt
    ctx = assemble({"snapshot": str(path)}, role="worker", task="tidy the repo")
    assert (
        "None matched your task; run `nexus status` to see every capability." in ctx.system_prompt
    )
    ctx = assemble({"snapshot": str(path), "worker_scope": "all"}, role="worker", task="tidy")
    assert "Communication: email-read, email-send ✅" in ctx.system_prompt


@pytest.mark.parametrize(
    ("scope", "shown"),
    [
        (["email-*"], "Communication: email-read, email-send ✅\n("),
        (["EMAIL-READ", "social"], "Communication: email-read ✅\nSocial: news"),
        ("email-send", "Communication: email-send ✅\n("),
    ],
)
def test_a_workers_scope_may_be_globs_names_or_categories(tmp_path, scope, shown):
    path = write_snapshot(tmp_path / "s.json", SNAPSHOT)
    ctx = assemble(
        {"snapshot": str(path)}, role="worker", task="x", metadata={"nexus_scope": scope}
    )
    assert shown in ctx.system_prompt


def test_context_json_records_the_snapshot_hash(tmp_path):
    import hashlib

    path = write_snapshot(tmp_path / "s.json", SNAPSHOT)
    settings = nexus_plugin.Settings(snapshot=str(path))
    provider = nexus_plugin._provider(nexus_plugin._Source(), timeout=5)
    from lamina import LaminaConfig, ProviderContext, TokenBudget
    from lamina.testing import FIXED_NOW

    a = make_assembler()
    tokenizer = a.model("gpt-4o").tokenizer
    ctx = ProviderContext(
        request=a.request("x"),
        config=LaminaConfig(),
        settings=settings,
        budget=TokenBudget.plan(model_limit=1000),
        tokenizer=tokenizer,
        now=FIXED_NOW,
        plugin="nexus",
    )
    (block,) = provider.provide(ctx)
    a.close()
    canonical = json.dumps(
        {
            "capabilities": [
                ["chat-send", "Communication", "needs_setup", "no workspace"],
                ["email-read", "Communication", "ready", None],
                ["email-send", "Communication", "ready", None],
                ["news", "Social", "needs_setup", "needs API key"],
                ["social-x", "Social", "broken", "token expired"],
            ],
            "credentials": [12, ["twitter"], 1],
        },
        separators=(",", ":"),
    )
    assert block.provenance.metadata["context_json"] == {
        "nexusEnv": {
            "capabilityCount": 5,
            "snapshotHash": hashlib.sha256(canonical.encode()).hexdigest(),
            "scoped": False,
        }
    }


def test_inert_without_a_section():
    a = make_assembler({"model": "gpt-4o"}, plugins=[("nexus", nexus_plugin)])
    with a:
        ctx = a.assemble(a.request("hi"))
    assert ctx.system_prompt == "" and ctx.report.warnings == ()


def test_section_without_a_source_is_a_config_error():
    with pytest.raises(
        ConfigError, match=r"key plugins.nexus: set snapshot \(a JSON file\) or command"
    ):
        make_assembler({"plugins": {"nexus": {"timeout": 2}}}, plugins=[("nexus", nexus_plugin)])


def test_both_sources_is_a_settings_error():
    with pytest.raises(Exception, match="give snapshot or command, not both"):
        make_assembler(
            {"plugins": {"nexus": {"snapshot": "a.json", "command": ["nexus"]}}},
            plugins=[("nexus", nexus_plugin)],
        )


def test_a_fifo_snapshot_is_a_warning_not_a_hang(tmp_path):
    import os

    os.mkfifo(tmp_path / "s.json")
    ctx = assemble({"snapshot": str(tmp_path / "s.json")})
    assert ctx.system_prompt == ""
    assert "cannot read snapshot" in ctx.report.warnings[0]
    assert "not a regular file" in ctx.report.warnings[0]

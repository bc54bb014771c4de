"""The system prompt: workspace and persona layers, roles, byte-stability, provenance."""

from __future__ import annotations

import hashlib
import os
from datetime import UTC, datetime

import pytest
from lamina_workspace import plugin as workspace_plugin
from lamina_workspace.settings import Settings
from lamina_workspace.system_prompt import MANAGER_RULES, WORKER_RULES, SystemSources

from lamina import ConfigError, LaminaConfig
from lamina.testing import make_assembler

MANAGER_PROMPT = f"""## Workspace rules

# Rules

- Be brief.

## User

- Name: Dana
- Timezone: Europe/Lisbon

## Who you are

You are Atlas, calm and precise.

## Your identity

- Name: Atlas

## Runtime

host: h1
os: linux
arch: x86_64

## Messaging

{MANAGER_RULES}"""


def test_manager_system_prompt_is_exactly_the_sources_in_fixed_order(
    workspace, assembler, config_for
):
    a = assembler(config_for(workspace))
    ctx = a.assemble(a.request("hello", role="manager"))
    assert ctx.system_prompt == MANAGER_PROMPT


def test_system_prompt_is_byte_stable_across_turns(workspace, assembler, config_for):
    a = assembler(config_for(workspace))
    first = a.assemble(
        a.request("turn one", role="manager", time=datetime(2026, 1, 1, 9, tzinfo=UTC))
    )
    second = a.assemble(
        a.request(
            "turn two, much later",
            role="manager",
            time=datetime(2026, 3, 4, 17, 30, tzinfo=UTC),
            platform="imessage",
        )
    )
    assert first.system_prompt == second.system_prompt
    assert first.report.stable_prefix.sha256 == second.report.stable_prefix.sha256
    assert "2026" not in first.system_prompt  # no timestamps in the cached prefix


def test_system_prompt_changes_when_a_source_changes(workspace, assembler, config_for):
    a = assembler(config_for(workspace))
    before = a.assemble(a.request("x", role="manager")).system_prompt
    agents = workspace / "AGENTS.md"
    agents.write_text("# Rules\n\n- Be thorough.\n", "utf-8")
    st = agents.stat()
    os.utime(agents, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
    after = a.assemble(a.request("x", role="manager")).system_prompt
    assert "- Be thorough." in after
    assert after != before


def test_worker_gets_task_rules_inherited_persona_and_no_runtime_or_messaging(
    workspace, assembler, config_for, write
):
    write(workspace, "personas/scout/SOUL.md", "You are Scout.\n")
    a = assembler(config_for(workspace))
    ctx = a.assemble(
        a.request(
            "go",
            role="worker",
            task="Summarise ## the deploy log",
            metadata={"manager_persona": "atlas", "persona": "scout"},
            platform="slack",
            platform_actions=("reply",),
        )
    )
    expected = f"""# Subagent Context

You are a **worker agent** spawned for a specific task.

## Your Task

```
Summarise ## the deploy log
```

## Rules

{WORKER_RULES}

## Workspace rules

# Rules

- Be brief.

## User

- Name: Dana
- Timezone: Europe/Lisbon

## Who you are

You are Atlas, calm and precise.

## Your identity

- Name: Atlas"""
    assert ctx.system_prompt == expected
    text = ctx.current_message.content[0].text
    assert "Platform" not in text and "Available actions" not in text


def test_manager_gets_platform_actions_in_the_event(workspace, assembler, config_for):
    a = assembler(config_for(workspace))
    ctx = a.assemble(
        a.request("hi", role="manager", platform="slack", platform_actions=("reply", "react"))
    )
    text = ctx.current_message.content[0].text
    assert "Platform: slack\nAvailable actions: reply, react" in text


def test_unified_gets_runtime_but_no_manager_messaging_rules(workspace, assembler, config_for):
    a = assembler(config_for(workspace))
    prompt = a.assemble(a.request("hi", role="unified")).system_prompt
    assert prompt == MANAGER_PROMPT.split("\n\n## Messaging")[0]


def test_worker_without_a_task_is_a_clear_error(workspace, assembler, config_for):
    a = assembler(config_for(workspace))
    with pytest.raises(ConfigError, match=r"worker's system prompt needs its task"):
        a.assemble(a.request("go", role="worker"))


def test_missing_required_file_names_the_file_and_key(workspace, assembler, config_for):
    (workspace / "AGENTS.md").unlink()
    a = assembler(config_for(workspace))
    with pytest.raises(ConfigError) as info:
        a.assemble(a.request("x"))
    message = str(info.value)
    assert "key plugins.workspace.agents" in message
    assert "required workspace file AGENTS.md" in message
    assert "no such file" in message


def test_missing_optional_files_are_fine(workspace, assembler, config_for):
    (workspace / "IDENTITY.md").unlink()
    (workspace / "personas/atlas/IDENTITY.md").unlink()
    a = assembler(config_for(workspace))
    prompt = a.assemble(a.request("x", role="unified")).system_prompt
    assert "## User" not in prompt and "## Your identity" not in prompt
    assert "## Who you are" in prompt


def test_required_list_makes_an_optional_file_required(workspace, assembler, config_for):
    (workspace / "IDENTITY.md").unlink()
    a = assembler(config_for(workspace, required=["agents", "soul", "user_identity"]))
    with pytest.raises(ConfigError, match=r"key plugins\.workspace\.user_identity"):
        a.assemble(a.request("x"))


def test_source_path_outside_the_root_is_refused(workspace, assembler, tmp_path, config_for, write):
    write(tmp_path, "outside.md", "secret rules")
    a = assembler(config_for(workspace, agents="../outside.md"))
    with pytest.raises(ConfigError, match=r"'\.\.' is refused"):
        a.assemble(a.request("x"))


def test_symlinked_source_leading_out_is_refused(workspace, assembler, tmp_path, config_for, write):
    write(tmp_path, "outside.md", "secret rules")
    (workspace / "AGENTS.md").unlink()
    (workspace / "AGENTS.md").symlink_to(tmp_path / "outside.md")
    a = assembler(config_for(workspace))
    with pytest.raises(ConfigError, match=r"resolves outside the workspace root"):
        a.assemble(a.request("x"))


def test_bad_persona_in_request_is_refused(workspace, assembler, config_for):
    a = assembler(config_for(workspace))
    with pytest.raises(ConfigError, match=r"persona must be a plain folder name"):
        a.assemble(a.request("x", metadata={"persona": "../atlas"}))


def test_context_json_records_source_hashes_and_persona(workspace):
    config = LaminaConfig()
    settings = Settings(root=str(workspace), persona="atlas", version=2)
    blocks = list(
        SystemSources(config, settings, "workspace").blocks(
            make_assembler().request("x", role="unified")
        )
    )
    meta = {b.id: b.provenance.metadata.get("context_json") for b in blocks}
    assert meta["workspace:agents"] == {
        "workspace": {
            "agentsMdHash": hashlib.sha256((workspace / "AGENTS.md").read_bytes()).hexdigest(),
            "version": 2,
        }
    }
    assert meta["persona:soul"] == {
        "persona": {
            "id": "atlas",
            "soulHash": hashlib.sha256(
                (workspace / "personas/atlas/SOUL.md").read_bytes()
            ).hexdigest(),
        }
    }
    assert {b.id: b.provenance.path for b in blocks}["persona:soul"] == "personas/atlas/SOUL.md"


def test_assembled_context_carries_the_system_prompts_context_json(
    workspace, assembler, config_for
):
    a = assembler(config_for(workspace))
    merged = a.assemble(a.request("x")).system_context_json
    assert (
        merged["workspace"]["agentsMdHash"]
        == hashlib.sha256((workspace / "AGENTS.md").read_bytes()).hexdigest()
    )
    assert merged["persona"]["id"] == "atlas"
    assert (
        merged["persona"]["soulHash"]
        == hashlib.sha256((workspace / "personas/atlas/SOUL.md").read_bytes()).hexdigest()
    )


def test_plugin_without_config_section_is_inert():
    a = make_assembler({"model": "gpt-4o"}, plugins=[("workspace", workspace_plugin)])
    with a:
        ctx = a.assemble(a.request("hello"))
    assert ctx.system_prompt == ""
    assert ctx.report.warnings == ()
    assert all(b.plugin != "workspace" for b in ctx.report.blocks)


def test_unchanged_sources_are_not_re_read(workspace, monkeypatch):
    from lamina_workspace import files

    calls: list[str] = []
    real = files.read_open

    def counting(fd: int, size: int, **kw):  # type: ignore[no-untyped-def]
        calls.append(kw["shown"])
        return real(fd, size, **kw)

    monkeypatch.setattr(files, "read_open", counting)
    sources = SystemSources(LaminaConfig(), Settings(root=str(workspace), persona="atlas"), "ws")
    req = make_assembler().request("x")
    list(sources.blocks(req))
    first = len(calls)
    list(sources.blocks(req))
    assert first == 4 and len(calls) == 4

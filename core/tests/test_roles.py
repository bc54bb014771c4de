"""Agent roles (the Broker design's manager-versus-worker table): a worker's task reaches the
request from the command line, its tools are scoped to that task, and on the bundled example
its context is its own, not its manager's."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from lamina.builtins.permissions_plugin import in_scope, permitted
from lamina.model.request import AssemblyRequest, Event, Tool

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "workspace"
TOOLS = """
[[tools]]
name = "email-send"
permission = "email-send"

[[tools]]
name = "deploy-logs"
permission = "logs-read"

[[tools]]
name = "note"
"""


def lamina(*args: str, plugins: bool = False) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "LAMINA_PLUGINS"}
    if not plugins:
        env["LAMINA_PLUGINS"] = ""
    return subprocess.run(
        [sys.executable, "-m", "lamina", *args], capture_output=True, text=True, env=env
    )


@pytest.fixture
def config(tmp_path: Path) -> Path:
    path = tmp_path / "lamina.toml"
    path.write_text(f'model = "gpt-4o"\npermissions = ["email-*", "logs-*"]\n{TOOLS}')
    return path


def tools_of(out: subprocess.CompletedProcess[str]) -> list[str]:
    assert out.returncode == 0, out.stderr
    return [t["name"] for t in json.loads(out.stdout)["tools"]]


def assemble(config: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return lamina("assemble", "--config", str(config), "--message", "go", *args)


# -- the command line ---------------------------------------------------------------------


def test_a_worker_gets_only_the_tools_its_task_names(config: Path) -> None:
    assert tools_of(assemble(config)) == ["email-send", "deploy-logs", "note"]
    worker = ("--role", "worker", "--task")
    assert tools_of(assemble(config, *worker, "Summarize deploy-logs.")) == ["deploy-logs", "note"]
    assert tools_of(assemble(config, *worker, "Send it with email-send.")) == [
        "email-send",
        "note",
    ]
    assert tools_of(assemble(config, *worker, "Tidy up.")) == ["note"]


def test_scope_names_a_workers_tools(config: Path) -> None:
    out = assemble(config, "--role", "worker", "--task", "Tidy up.", "--scope", "email-*")
    assert tools_of(out) == ["email-send", "note"]
    out = assemble(config, "--role", "worker", "--task", "x", "--scope", "*")
    assert tools_of(out) == ["email-send", "deploy-logs", "note"]  # still only what is permitted


def test_task_file(config: Path, tmp_path: Path) -> None:
    task = tmp_path / "task.md"
    task.write_text("Look at the deploy-logs from this morning.\n")
    out = assemble(config, "--role", "worker", "--task-file", str(task))
    assert tools_of(out) == ["deploy-logs", "note"]


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (("--task", "x"), "add --role worker"),
        (("--scope", "email-*"), "add --role worker"),
        (("--role", "worker", "--task", "x", "--task-file", "lamina.toml"), "not both"),
        (("--role", "worker", "--task", "  \n"), "may not be empty"),
        (("--role", "worker", "--task-file", "missing.md"), "missing.md"),
        (("--role", "worker", "--task-file", "binary.md"), "not UTF-8"),
    ],
)
def test_bad_worker_options_exit_2_and_say_why(
    config: Path, args: tuple[str, ...], says: str
) -> None:
    (config.parent / "binary.md").write_bytes(b"\xff\xfe task")
    args = tuple(str(config.parent / a) if a.endswith((".md", ".toml")) else a for a in args)
    out = assemble(config, *args)
    assert out.returncode == 2
    assert says in out.stderr
    assert "Traceback" not in out.stderr


# -- the scope rule ----------------------------------------------------------------------


def request(role: str = "worker", task: str | None = None, **metadata: object) -> AssemblyRequest:
    return AssemblyRequest(
        session_label="s",
        event=Event(content="go"),
        model="gpt-4o",
        role=role,  # type: ignore[arg-type]
        task=task,
        permissions=("*",),
        metadata=dict(metadata),
    )


SEND = Tool(name="email-send", permission="email-send")
OPEN = Tool(name="note")


@pytest.mark.parametrize("role", ["manager", "unified"])
def test_managers_and_unified_agents_are_not_scoped(role: str) -> None:
    assert in_scope(SEND, request(role, task="nothing about mail"))


@pytest.mark.parametrize(
    ("task", "scope", "allowed"),
    [
        ("Draft a reply; do not send it.", None, False),
        ("Send the draft (email-send).", None, True),
        ("EMAIL-SEND the draft.", None, True),
        ("Send the draft via email-sender.", None, False),
        (None, None, False),
        ("x", ["email-send"], True),
        ("x", ["EMAIL-*"], True),
        ("x", "email-send", True),
        ("Send it with email-send.", ["calendar-*"], False),  # an explicit scope wins
    ],
)
def test_worker_scope(task: str | None, scope: object, allowed: bool) -> None:
    metadata = {} if scope is None else {"tool_scope": scope}
    assert in_scope(SEND, request(task=task, **metadata)) is allowed
    assert in_scope(OPEN, request(task=task, **metadata))  # open tools are never scoped out


def test_scope_never_grants_a_permission() -> None:
    req = AssemblyRequest(
        session_label="s",
        event=Event(content="go"),
        model="gpt-4o",
        role="worker",
        task="Send it with email-send.",
        permissions=("calendar-*",),
    )
    assert in_scope(SEND, req) and not permitted(SEND, req)


# -- the bundled example -------------------------------------------------------------------


@pytest.fixture
def example(tmp_path: Path) -> Path:
    """The example workspace copied, its session imported into the ledger."""
    pytest.importorskip("lamina_workspace")
    pytest.importorskip("lamina_nexus")
    pytest.importorskip("lamina_ledger")
    dest = tmp_path / "workspace"
    shutil.copytree(EXAMPLE, dest, ignore=shutil.ignore_patterns("*.db*", ".lamina"))
    config = str(dest / "lamina.toml")
    sessions = str(dest / "sessions" / "demo.jsonl")
    imported = lamina(
        "ledger", "import", sessions, "--session", "demo", "--config", config, plugins=True
    )
    assert imported.returncode == 0, imported.stderr
    return dest / "lamina.toml"


TASK = "Read the deploy-logs from this morning and report why staging failed."


def worker_context(config: Path, *args: str) -> dict[str, object]:
    out = lamina(
        "assemble",
        "--config",
        str(config),
        "--role",
        "worker",
        "--task",
        TASK,
        "--message",
        "Start.",
        "--time",
        "2026-01-14T10:30:00+00:00",
        *args,
        plugins=True,
    )
    assert out.returncode == 0, out.stderr
    ctx: dict[str, object] = json.loads(out.stdout)
    return ctx


def test_a_worker_on_the_example_gets_its_task_scoped_tools_and_capabilities(
    example: Path,
) -> None:
    ctx = worker_context(example)
    prompt = str(ctx["system_prompt"])
    assert "# Subagent Context" in prompt
    assert f"## Your Task\n\n```\n{TASK}\n```" in prompt
    assert "## Messaging" not in prompt and "## Runtime" not in prompt  # managers' parts
    nexus = prompt[prompt.index("## Nexus Environment") :]
    assert "### Capabilities (scoped to your task)\nEngineering: deploy-logs ✅\n" in nexus
    assert "email-send" not in nexus
    names = [t["name"] for t in ctx["tools"]]  # type: ignore[union-attr]
    assert "email-send" not in names  # the manager's email-send is not the worker's
    assert names == ["add_to_working_set", "remove_from_working_set", "adjust_priority"]
    current = ctx["current_message"]["content"][0]["text"]  # type: ignore[index]
    assert "Platform:" not in current


def test_a_worker_on_the_example_gets_no_manager_history(example: Path) -> None:
    assert worker_context(example)["history"] == []

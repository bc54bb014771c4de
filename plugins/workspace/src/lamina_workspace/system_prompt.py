"""The static system-prompt blocks of the Broker design: workspace rules, user identity,
persona, runtime info and the role-specific parts (manager messaging rules; a worker's task
and rules).

Every block is built from file contents and settings only, in a fixed order with no
timestamps, so the system prompt is byte-stable while its sources are unchanged.
"""

from __future__ import annotations

import platform
from collections.abc import Iterator
from typing import Any

from lamina import PERSONA, WORKSPACE, AssemblyRequest, Block, ConfigError, LaminaConfig, Provenance
from lamina_workspace.beneath import FileRefused
from lamina_workspace.files import TextCache
from lamina_workspace.settings import Settings, valid_persona_id
from lamina_workspace.where import workspace_root

RUNTIME_LAYER = "runtime"

WORKER_PREAMBLE = """# Subagent Context

You are a **worker agent** spawned for a specific task."""

WORKER_RULES = """1. Stay focused — do your assigned task, nothing else
2. Complete the task — your final message reports back to the manager
3. Don't initiate — no proactive actions, no side quests
4. Be ephemeral — you may be terminated after completion

What you DON'T do:
- NO user conversations (manager's job)
- NO external messages unless explicitly tasked
- NO persistent state changes outside your task scope"""

MANAGER_RULES = """- You talk with the user; the current message names the platform and the actions available on it.
- Reply through those platform actions only; send nothing external the user did not ask for.
- Hand long or parallel work to worker agents with a clear task; their final reports come back to you."""


def persona_id(request: AssemblyRequest, settings: Settings) -> str:
    """The persona for this request: a worker inherits its manager's (``manager_persona`` in
    the request metadata), anyone else may name one (``persona``); else the configured one."""
    meta = request.metadata
    chosen: Any = None
    if request.role == "worker":
        chosen = meta.get("manager_persona")
    chosen = chosen or meta.get("persona") or settings.persona
    if not isinstance(chosen, str) or not valid_persona_id(chosen):
        raise ConfigError(
            f"persona must be a plain folder name, got {chosen!r}", key="request.metadata.persona"
        )
    return chosen


class SystemSources:
    """Reads the workspace's files through one cache for an assembler's lifetime."""

    def __init__(self, config: LaminaConfig, settings: Settings, plugin: str) -> None:
        self.config, self.settings, self.plugin = config, settings, plugin
        self.cache = TextCache()
        self.root = workspace_root(config, settings)

    def read(self, source: str, relative: str, key: str | None = None) -> tuple[str, str] | None:
        """(text, sha256) of a workspace file, ``None`` when an optional one is missing;
        errors name the settings ``key`` (default: the source's own)."""
        try:
            got = self.cache.read(self.root, relative, max_bytes=self.settings.max_source_bytes)
        except FileRefused as exc:
            if exc.reason == "no such file" and source not in self.settings.required:
                return None
            what = "required " if source in self.settings.required else ""
            raise ConfigError(
                f"{what}workspace file {relative} (under {self.root}): {exc.reason}",
                file=self.config.path,
                key=f"plugins.{self.plugin}.{key or source}",
            ) from exc
        return got.text, got.sha256

    def _block(
        self,
        id: str,
        layer: str,
        text: str,
        title: str,
        *,
        path: str | None = None,
        trusted: bool = True,
        context_json: dict[str, Any] | None = None,
    ) -> Block:
        metadata = {"context_json": context_json} if context_json else {}
        return Block.text(
            id,
            layer,
            text.rstrip("\n"),  # the formatter separates blocks itself
            title=title,
            trusted=trusted,
            truncation="never",
            provenance=Provenance(plugin=self.plugin, source_id=id, path=path, metadata=metadata),
        )

    def blocks(self, request: AssemblyRequest) -> Iterator[Block]:
        """The system-prompt blocks for ``request``'s role, in their fixed order."""
        s = self.settings
        role = request.role
        if role == "worker":
            task = (request.task or "").strip()
            if not task:
                raise ConfigError(
                    "a worker's system prompt needs its task: set AssemblyRequest.task "
                    "(lamina assemble --role worker --task TEXT or --task-file PATH)",
                    key="request.task",
                )
            yield self._block("worker:preamble", WORKSPACE, WORKER_PREAMBLE, "")
            # The task comes from the manager model: data, fenced by the markdown formatter.
            yield self._block("worker:task", WORKSPACE, task, "Your Task", trusted=False)
            rules = self._override(s.worker_rules, "worker_rules") or WORKER_RULES
            yield self._block("worker:rules", WORKSPACE, rules, "Rules")
        agents = self.read("agents", s.agents)
        if agents is not None:
            ws: dict[str, Any] = {"agentsMdHash": agents[1]}
            if s.version is not None:
                ws["version"] = s.version
            yield self._block(
                "workspace:agents",
                WORKSPACE,
                agents[0],
                "Workspace rules",
                path=s.agents,
                context_json={"workspace": ws},
            )
        user = self.read("user_identity", s.user_identity)
        if user is not None:
            yield self._block(
                "workspace:user",
                WORKSPACE,
                user[0],
                "User",
                path=s.user_identity,
                context_json={"workspace": {"userIdentityHash": user[1]}},
            )
        pid = persona_id(request, s)
        folder = f"{s.personas}/{pid}"
        for source, name, title, key in (
            ("soul", s.soul, "Who you are", "soulHash"),
            ("identity", s.identity, "Your identity", "identityHash"),
            ("permissions", s.permissions, "Permissions and constraints", "permissionsHash"),
        ):
            rel = f"{folder}/{name}"
            got = self.read(source, rel)
            if got is not None:
                yield self._block(
                    f"persona:{source}",
                    PERSONA,
                    got[0],
                    title,
                    path=rel,
                    context_json={"persona": {"id": pid, key: got[1]}},
                )
        if s.runtime and role != "worker":
            yield self._block("runtime:info", RUNTIME_LAYER, self.runtime_text(), "Runtime")
        if role == "manager":
            rules = self._override(s.manager_rules, "manager_rules") or MANAGER_RULES
            yield self._block("runtime:messaging", RUNTIME_LAYER, rules, "Messaging")

    def runtime_text(self) -> str:
        """Static runtime info: host, os, arch (settings override what the machine says)."""
        s = self.settings
        host = s.host or platform.node() or "unknown"
        os_name = s.os or platform.system().lower() or "unknown"
        arch = s.arch or platform.machine() or "unknown"
        return f"host: {host}\nos: {os_name}\narch: {arch}"

    def _override(self, relative: str | None, key: str) -> str | None:
        if relative is None:
            return None
        try:
            return self.cache.read(
                self.root, relative, max_bytes=self.settings.max_source_bytes
            ).text
        except FileRefused as exc:
            raise ConfigError(
                f"{relative}: {exc.reason}",
                file=self.config.path,
                key=f"plugins.{self.plugin}.{key}",
            ) from exc

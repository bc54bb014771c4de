// A real `lamina serve` (the ledger on SQLite in a temporary directory) on a free loopback
// port, and a ten-turn agent loop through the client: assemble, a scripted model reply with a
// tool call and its result, record, again; then the session's statistics.

import assert from "node:assert/strict";
import { spawn, type ChildProcessWithoutNullStreams } from "node:child_process";
import { existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { after, before, test } from "node:test";
import { fileURLToPath } from "node:url";

import { LaminaClient, LaminaError } from "../src/index.js";
import type { AgentResult, AssembledContext, Message } from "../src/index.js";

const here = dirname(fileURLToPath(import.meta.url));
const repo = resolve(here, "..", "..", "..", "..");

function python(): string {
  const given = process.env.LAMINA_PYTHON;
  if (given) return given;
  const venv = join(repo, ".venv", "bin", "python");
  return existsSync(venv) ? venv : "python3";
}

let server: ChildProcessWithoutNullStreams;
let workdir: string;
let client: LaminaClient;

/** Start `lamina serve --port 0` and read the address from its ready line. */
function start(config: string): Promise<string> {
  server = spawn(python(), ["-m", "lamina", "serve", "--config", config, "--port", "0"], {
    env: { ...process.env, LAMINA_PLUGINS: "ledger", LAMINA_SERVE_TOKEN: "" },
  });
  let errors = "";
  server.stderr.on("data", (chunk: Buffer) => (errors += chunk.toString()));
  return new Promise((resolveUrl, reject) => {
    let seen = "";
    const timer = setTimeout(() => reject(new Error(`no ready line in 60 s: ${errors}`)), 60_000);
    server.stdout.on("data", (chunk: Buffer) => {
      seen += chunk.toString();
      const found = /serving on (http:\/\/\S+)/.exec(seen);
      if (found?.[1]) {
        clearTimeout(timer);
        resolveUrl(found[1]);
      }
    });
    server.on("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`lamina serve exited with ${code}: ${errors}`));
    });
  });
}

before(async () => {
  workdir = mkdtempSync(join(tmpdir(), "lamina-ts-"));
  const config = join(workdir, "lamina.toml");
  writeFileSync(
    config,
    'model = "gpt-4o"\nsession = "default"\n[plugins.ledger]\ndatabase = "ledger.db"\n',
  );
  client = new LaminaClient({ baseUrl: await start(config) });
});

after(() => {
  server?.kill("SIGTERM");
  rmSync(workdir, { recursive: true, force: true });
});

/** The scripted model: it reads a file through a tool, then answers. */
function modelTurn(ctx: AssembledContext, n: number): AgentResult {
  const used = ctx.token_budget.used.total;
  const messages: Message[] = [
    ctx.current_message,
    {
      role: "assistant",
      content: [{ type: "tool_call", id: `call-${n}`, name: "read_file", arguments: { path: `notes/${n}.md` } }],
    },
    { role: "tool", content: [{ type: "tool_result", call_id: `call-${n}`, content: `note ${n}: all good` }] },
    { role: "assistant", content: [{ type: "text", text: `Turn ${n}: the note says all good.` }] },
  ];
  return {
    messages,
    usage: { input_tokens: used, cached_input_tokens: Math.floor(used / 2), output_tokens: 12 },
    stop_reason: "end_turn",
  };
}

test("ten turns of an agent loop through lamina serve", async () => {
  const health = await client.health();
  assert.equal(health.status, "ok");
  assert.equal(health.store, "ledger");

  const label = "ts-loop";
  const historySizes: number[] = [];
  for (let n = 0; n < 10; n++) {
    const ctx = await client.assemble({ message: `What does note ${n} say?`, session_label: label });
    historySizes.push(ctx.history.length);
    const recorded = await client.recordTurn(label, modelTurn(ctx, n));
    assert.equal(recorded.session_label, label);
  }
  assert.deepEqual(historySizes, [0, 4, 8, 12, 16, 20, 24, 28, 32, 36]);

  const last = await client.assemble({ message: "Summarize.", session_label: label });
  const calls = last.history.flatMap((m) => m.content).filter((p) => p.type === "tool_call");
  assert.equal(calls.length, 10);

  const stats = await client.stats(label);
  assert.equal(stats.turns, 10);
  assert.equal(stats.turns_with_usage, 10);
  assert.ok(stats.cache_hit_ratio !== null && stats.cache_hit_ratio > 0.4);
});

test("errors arrive as LaminaError with the problem", async () => {
  await assert.rejects(client.stats("nobody"), (err: unknown) => {
    assert.ok(err instanceof LaminaError);
    assert.equal(err.status, 404);
    assert.equal(err.problem.type, "urn:lamina:problem:not-found");
    return true;
  });
  await assert.rejects(client.assemble({ message: "word ".repeat(500), max_tokens: 20 }), (err: unknown) => {
    assert.ok(err instanceof LaminaError);
    assert.equal(err.status, 422);
    assert.ok((err.problem.overage ?? 0) > 0);
    return true;
  });
});

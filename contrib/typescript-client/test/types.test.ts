// src/types.ts is what the generator makes of the schema shipped in docs/schema/.

import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { test } from "node:test";
import { fileURLToPath, pathToFileURL } from "node:url";

const root = resolve(dirname(fileURLToPath(import.meta.url)), "..", "..");

test("src/types.ts is generated from the current schema", async () => {
  const generator = await import(pathToFileURL(join(root, "scripts", "generate-types.mjs")).href);
  const schema = JSON.parse(readFileSync(generator.SCHEMA, "utf8"));
  const current = readFileSync(join(root, "src", "types.ts"), "utf8");
  assert.equal(current, generator.render(schema), "src/types.ts is stale: run `npm run generate`");
});

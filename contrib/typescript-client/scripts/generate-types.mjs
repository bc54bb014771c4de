// Generates src/types.ts from Lamina's JSON Schema (docs/schema/lamina.schema.json).
//
//   node scripts/generate-types.mjs           write src/types.ts
//   node scripts/generate-types.mjs --check   exit 1 when src/types.ts is stale
//
// A small generator for the subset of JSON Schema Lamina's schema uses: $ref, const, enum,
// anyOf/oneOf, arrays, objects with properties or additionalProperties, and the primitives.
// A property the schema does not require is optional (`?`), as a host may leave it out.
// LAMINA_SCHEMA names another copy of the schema (the package checked out on its own).

import { readFileSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
export const SCHEMA =
  process.env.LAMINA_SCHEMA ?? join(here, "..", "..", "..", "docs", "schema", "lamina.schema.json");
export const OUTPUT = join(here, "..", "src", "types.ts");

const PRIMITIVES = {
  string: "string",
  integer: "number",
  number: "number",
  boolean: "boolean",
  null: "null",
};

function union(members) {
  const unique = [...new Set(members)];
  return unique.length ? unique.join(" | ") : "never";
}

function tsType(schema) {
  if (schema === true || Object.keys(schema).length === 0) return "unknown";
  if (schema.$ref) return schema.$ref.split("/").pop();
  if ("const" in schema) return JSON.stringify(schema.const);
  if (schema.enum) return union(schema.enum.map((v) => JSON.stringify(v)));
  const choices = schema.anyOf ?? schema.oneOf;
  if (choices) return union(choices.map(tsType));
  switch (schema.type) {
    case "array": {
      const item = tsType(schema.items ?? {});
      return /[ |]/.test(item) ? `(${item})[]` : `${item}[]`;
    }
    case "object": {
      if (schema.properties) return objectBody(schema, "");
      const value = schema.additionalProperties ? tsType(schema.additionalProperties) : "unknown";
      return `{ [key: string]: ${value} }`;
    }
    default:
      if (schema.type in PRIMITIVES) return PRIMITIVES[schema.type];
      throw new Error(`no TypeScript type for ${JSON.stringify(schema)}`);
  }
}

function comment(text, indent) {
  if (!text) return "";
  const safe = text.replaceAll("*/", "*\\/");
  return `${indent}/** ${safe} */\n`;
}

function objectBody(schema, indent) {
  const required = new Set(schema.required ?? []);
  const lines = Object.entries(schema.properties).map(([name, prop]) => {
    const optional = required.has(name) ? "" : "?";
    return `${comment(prop.description, indent + "  ")}${indent}  ${name}${optional}: ${tsType(prop)};`;
  });
  return `{\n${lines.join("\n")}\n${indent}}`;
}

export function render(schema) {
  const out = [
    "// Generated from docs/schema/lamina.schema.json by scripts/generate-types.mjs: do not edit.",
    "// Regenerate with `npm run generate` after the schema changes.",
    "",
  ];
  for (const [name, def] of Object.entries(schema.$defs)) {
    out.push(comment(def.description, "").trimEnd());
    if (def.type === "object" && def.properties) {
      out.push(`export interface ${name} ${objectBody(def, "")}`);
    } else {
      out.push(`export type ${name} = ${tsType(def)};`);
    }
    out.push("");
  }
  return out.filter((line, i) => line !== "" || out[i - 1] !== "").join("\n");
}

function main() {
  const text = render(JSON.parse(readFileSync(SCHEMA, "utf8")));
  if (process.argv.includes("--check")) {
    const current = readFileSync(OUTPUT, "utf8");
    if (current !== text) {
      console.error("src/types.ts is stale: run `npm run generate`");
      process.exit(1);
    }
    return;
  }
  writeFileSync(OUTPUT, text);
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) main();

// The client for `lamina serve` and the wire types generated from Lamina's JSON Schema.
export { LaminaClient, LaminaError } from "./client.js";
export type { ClientOptions } from "./client.js";
export type * from "./types.js";

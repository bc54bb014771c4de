// Generated from docs/schema/lamina.schema.json by scripts/generate-types.mjs: do not edit.
// Regenerate with `npm run generate` after the schema changes.

/** One finished turn: its messages, the provider's usage, why it stopped and any error. */
export interface AgentResult {
  messages: Message[];
  usage?: Usage;
  stop_reason?: string;
  error?: string | null;
  model?: string | null;
  provider?: string | null;
  parent_turn_id?: string | null;
}

/** The three physical layers plus everything the engine and the ledger write need. */
export interface AssembledContext {
  system_prompt: string;
  history: Message[];
  current_message: Message;
  tools: Tool[];
  model: string;
  provider: string;
  model_config: ModelConfig;
  token_budget: TokenBudget;
  session_label: string;
  role: "manager" | "worker" | "unified";
  workspace_path: string;
  parent_turn_id: string | null;
  toolset_name: string | null;
  permissions_granted: string[];
  source_event_id: string | null;
  system_context_json: { [key: string]: unknown };
  report: AssemblyReport;
}

/** An assembly request as the service takes it: `message` (the event's text) or a whole `event`, and whatever differs from the service's config (session, model, role, permissions, tools, history, …). The workspace is the config's; a request cannot choose another directory. */
export interface AssemblyInput {
  message?: string | null;
  event?: Event | null;
  session_label?: string | null;
  model?: string | null;
  role?: "manager" | "worker" | "unified" | null;
  provider?: string | null;
  permissions?: string[] | null;
  tools?: Tool[];
  toolset_name?: string | null;
  max_tokens?: number | null;
  parent_turn_id?: string | null;
  model_config?: ModelConfig | null;
  task?: string | null;
  metadata?: { [key: string]: unknown };
  /** The conversation so far as the host keeps it (oldest first, tool calls with their results). Leave it out to use the stored session (the ledger). */
  history?: Message[] | null;
}

/** Everything a host needs to see why the context looks the way it does. */
export interface AssemblyReport {
  blocks: BlockReport[];
  layers: LayerReport[];
  dropped: DroppedReport[];
  verbose: boolean;
  warnings: string[];
  tokenizer: TokenizerReport | null;
  stable_prefix: StablePrefix | null;
  strategy: string;
  /** Where the history came from: `"request"` (the host's own list) or the plugin(s) that supplied it (`"ledger"`); `None` when there was none. */
  history_source: string | null;
  timings_ms: { [key: string]: number };
}

/** The fate of one block. `source_id` and `details` are the block's provenance (its metadata less `context_json`): e.g. the memory items a section holds, with their scores. */
export interface BlockReport {
  id: string;
  layer: string;
  placement: string;
  plugin: string;
  status: "kept" | "truncated" | "summarized" | "dropped";
  tokens: number;
  original_tokens: number;
  path: string | null;
  strategy: string | null;
  reason: string | null;
  hash: string;
  source_id: string | null;
  details: { [key: string]: unknown };
}

/** Tokens used per physical layer. */
export interface BudgetUsage {
  system_prompt: number;
  history: number;
  event: number;
  total: number;
}

/** What `POST /v1/sessions/{label}/compact` takes: the trigger, the share of the available tokens to compact to (`target`; default: the store's), instructions for the summary, and the model whose budget counts (default: the config's). */
export interface CompactionInput {
  trigger?: "manual" | "context_limit" | "overflow_recovery";
  target?: number | null;
  instructions?: string | null;
  model?: string | null;
  max_tokens?: number | null;
}

/** What a compaction did; `compacted` is false when there was nothing to summarize. */
export interface CompactionOutcome {
  session_label: string;
  compacted: boolean;
  trigger: string;
  turn_id: string | null;
  summarized_turns: number;
  kept_turns: number;
  tokens_before: number | null;
  tokens_after: number | null;
  warnings: string[];
}

/** The blocks of one layer that fitting dropped, in aggregate: how many, the tokens they held, the first and last (in output order) and why. A verbose report also lists each one in `AssemblyReport.blocks`. */
export interface DroppedReport {
  layer: string;
  placement: string;
  blocks: number;
  original_tokens: number;
  first_id: string;
  last_id: string;
  reasons: string[];
}

/** The current event (the Broker design's NexusEvent): its content and the dynamic context around it. */
export interface Event {
  content: string;
  id?: string | null;
  time?: string | null;
  timezone?: string;
  channel?: string | null;
  platform?: string | null;
  platform_actions?: string[];
  hook_data?: { [key: string]: unknown };
  attachments?: Part[];
  source?: string | null;
}

/** The reply to `GET /v1/health`. */
export interface Health {
  status: string;
  version: string;
  model: string;
  store: string | null;
}

/** An image, inline (base64 `data`) or by `url`; exactly one is set. */
export interface ImagePart {
  type: "image";
  media_type: string;
  data?: string | null;
  url?: string | null;
}

/** Totals for one conceptual layer. */
export interface LayerReport {
  layer: string;
  placement: string;
  blocks: number;
  kept: number;
  tokens: number;
  original_tokens: number;
  cap: number | null;
}

/** One message: a role and its parts, with the provenance the Broker design keeps in `context_json`. */
export interface Message {
  role: "system" | "user" | "assistant" | "tool";
  content: Part[];
  name?: string | null;
  context_json?: { [key: string]: unknown } | null;
}

/** Sampling settings handed through to the engine (the Broker design's `modelConfig`). */
export interface ModelConfig {
  temperature?: number | null;
  max_tokens?: number | null;
  thinking?: { [key: string]: unknown } | null;
  extra?: { [key: string]: unknown };
}

/** One part of a message's content, told apart by its `type`. */
export type Part = TextPart | ImagePart | ToolCallPart | ToolResultPart;

/** One plugin as `lamina plugins` shows it. */
export interface PluginInfo {
  name: string;
  distribution: string;
  version: string;
  builtin: boolean;
  hooks: string[];
  error: string | null;
}

/** Every error reply (`application/problem+json`, RFC 9457), with the kernel's fields when they apply: the config `key` and `file`, the `plugin` that failed, the budget `overage` and `available` tokens, and each problem of a malformed body (`errors`). */
export interface Problem {
  type: string;
  title: string;
  status: number;
  detail: string;
  key?: string | null;
  file?: string | null;
  plugin?: string | null;
  overage?: number | null;
  available?: number | null;
  errors?: string[] | null;
}

/** Totals over a session: its turns and compactions and the tokens the provider reported, so a host sees whether the prompt cache is hitting (`cache_hit_ratio`: cached input over all input, `None` before any usage was recorded). `details` holds the store's extras. */
export interface SessionStats {
  session_label: string;
  turns: number;
  compactions: number;
  input_tokens: number;
  cached_input_tokens: number;
  cache_creation_tokens: number;
  output_tokens: number;
  turns_with_usage: number;
  cache_hit_ratio: number | null;
  details: { [key: string]: unknown };
}

/** The part of the request that repeats turn after turn (system + history): its size and hash. */
export interface StablePrefix {
  tokens: number;
  sha256: string;
  tools_sha256: string | null;
}

/** Plain text. */
export interface TextPart {
  type: "text";
  text: string;
}

/** `available` = model limit − reserves (lower when the host caps it); `remaining` = available − used. */
export interface TokenBudget {
  model_limit: number;
  reserve_response: number;
  reserve_tools: number;
  available: number;
  used: BudgetUsage;
  remaining: number;
}

/** Which tokenizer counted, and whether its counts are exact or an estimate. */
export interface TokenizerReport {
  name: string;
  plugin: string;
  exact: boolean;
}

/** A tool the agent may call; `permission` names what the caller must hold to get it. */
export interface Tool {
  name: string;
  description?: string;
  input_schema?: { [key: string]: unknown };
  permission?: string | null;
}

/** The model asking for a tool; `id` pairs it with its `ToolResultPart`. */
export interface ToolCallPart {
  type: "tool_call";
  id: string;
  name: string;
  arguments?: { [key: string]: unknown };
}

/** What a tool returned for the call `call_id`. */
export interface ToolResultPart {
  type: "tool_result";
  call_id: string;
  content: string;
  is_error?: boolean;
}

/** The reply to `POST /v1/sessions/{label}/turns`: the new turn's id. */
export interface TurnRecorded {
  session_label: string;
  turn_id: string;
}

/** Provider-reported tokens: input (all of it), the cached part of it, cache writes, output. */
export interface Usage {
  input_tokens?: number;
  cached_input_tokens?: number;
  cache_creation_tokens?: number;
  output_tokens?: number;
}

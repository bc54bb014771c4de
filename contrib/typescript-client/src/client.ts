// A small fetch-based client for `lamina serve`: one method per endpoint, typed with the
// types generated from Lamina's JSON Schema, errors as `LaminaError` carrying the problem.

import type {
  AgentResult,
  AssembledContext,
  AssemblyInput,
  CompactionInput,
  CompactionOutcome,
  Health,
  PluginInfo,
  Problem,
  SessionStats,
  TurnRecorded,
} from "./types.js";

export interface ClientOptions {
  /** Where the service listens, e.g. `http://127.0.0.1:8642`. */
  baseUrl: string;
  /** The bearer token, when the service has one. */
  token?: string;
  /** A `fetch` to use instead of the global one. */
  fetch?: typeof fetch;
  /** Give up on a request after this many milliseconds (default 60 000). */
  timeoutMs?: number;
}

/** An error the service answered with (its `application/problem+json` body in `problem`). */
export class LaminaError extends Error {
  readonly status: number;
  readonly problem: Problem;

  constructor(problem: Problem) {
    super(`${problem.title} (${problem.status}): ${problem.detail}`);
    this.name = "LaminaError";
    this.status = problem.status;
    this.problem = problem;
  }
}

export class LaminaClient {
  private readonly baseUrl: string;
  private readonly token?: string;
  private readonly fetchImpl: typeof fetch;
  private readonly timeoutMs: number;

  constructor(options: ClientOptions) {
    this.baseUrl = options.baseUrl.replace(/\/+$/, "");
    this.token = options.token;
    this.fetchImpl = options.fetch ?? globalThis.fetch;
    this.timeoutMs = options.timeoutMs ?? 60_000;
  }

  /** Liveness, the version and the model and store the service runs. */
  health(): Promise<Health> {
    return this.request("GET", "/v1/health");
  }

  /** The context for one turn (the stored session's history unless `input.history` is given). */
  assemble(input: AssemblyInput): Promise<AssembledContext> {
    return this.request("POST", "/v1/assemble", input);
  }

  /** Record a finished turn: its messages (tool calls and results included) and usage. */
  recordTurn(label: string, result: AgentResult): Promise<TurnRecorded> {
    return this.request("POST", `${session(label)}/turns`, result);
  }

  /** Compact the session now (optionally to `target` of the budget, with instructions). */
  compact(label: string, input: CompactionInput = {}): Promise<CompactionOutcome> {
    return this.request("POST", `${session(label)}/compact`, input);
  }

  /** Turns, compactions and the tokens the provider reported (cache hit ratio included). */
  stats(label: string): Promise<SessionStats> {
    return this.request("GET", `${session(label)}/stats`);
  }

  /** The plugins the service loaded. */
  plugins(): Promise<PluginInfo[]> {
    return this.request("GET", "/v1/plugins");
  }

  private async request<T>(method: string, path: string, body?: unknown): Promise<T> {
    const headers: Record<string, string> = { accept: "application/json" };
    if (body !== undefined) headers["content-type"] = "application/json";
    if (this.token !== undefined) headers.authorization = `Bearer ${this.token}`;
    const response = await this.fetchImpl(this.baseUrl + path, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      signal: AbortSignal.timeout(this.timeoutMs),
    });
    const text = await response.text();
    if (!response.ok) throw new LaminaError(asProblem(response.status, text));
    return JSON.parse(text) as T;
  }
}

function session(label: string): string {
  return `/v1/sessions/${encodeURIComponent(label)}`;
}

function asProblem(status: number, text: string): Problem {
  try {
    const parsed = JSON.parse(text) as Problem;
    if (parsed && typeof parsed.title === "string") return parsed;
  } catch {
    // not JSON: a proxy's page, say
  }
  return { type: "about:blank", title: "HTTP error", status, detail: text.slice(0, 500) };
}

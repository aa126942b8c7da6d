import { createServer } from "node:http";
import type { IncomingMessage, ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";

export type FakeBlock =
  | { type: "text"; text: string }
  | { type: "thinking"; thinking: string }
  | { type: "tool_use"; name: string; input: Record<string, unknown>; id?: string };

export interface FakeTurn {
  content: FakeBlock[];
  /** Defaults to "tool_use" when content has a tool_use block, else "end_turn". */
  stopReason?: "end_turn" | "tool_use" | "max_tokens";
  /** Respond with an HTTP error instead (e.g. {status: 400, body: {type:"error", error:{...}}}). */
  error?: { status: number; body: unknown };
  /** Wait for this promise before answering. Waiting stops if the client disconnects. */
  gate?: Promise<unknown>;
  /** Delay between streamed chunks, ms (default 0). */
  chunkDelayMs?: number;
}

export interface RecordedRequest {
  path: string;
  headers: Record<string, string | string[] | undefined>;
  /** Parsed JSON body as sent by the client. */
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  body: any;
  /** The text of the last user message / tool results, flattened, for easy assertions. */
  lastUserText: string;
}

export type Responder = (request: RecordedRequest) => FakeTurn | Promise<FakeTurn>;

export interface FakeLlmServer {
  /** Base URL without "/v1", e.g. "http://127.0.0.1:41234". */
  url: string;
  /** Every completion request received, in order. */
  requests: RecordedRequest[];
  /** Scripted turns, consumed in order. */
  enqueue(...turns: FakeTurn[]): void;
  /** When set, used instead of the queue. */
  setResponder(responder: Responder | undefined): void;
  /** Clears the queue, the responder, the recorded requests and any emulated prompt cache. */
  reset(): void;
  /** Closes the server and any open connections. */
  close(): Promise<void>;
}

/** What a wire protocol (Anthropic, OpenAI) plugs into the shared server. */
export interface FakeProtocol {
  /** POST path of the completion endpoint, e.g. "/v1/messages". */
  completionPath: string;
  lastUserText(body: unknown): string;
  /** Writes a successful answer for the turn; must stop writing once `signal` aborts. */
  writeTurn(res: ServerResponse, turn: FakeTurn, body: unknown, signal: AbortSignal): Promise<void>;
  /**
   * Answers a completion request the API would refuse before any turn (an unknown model, a key it
   * does not know), recorded all the same; returns false to let it through.
   */
  refuse?(req: IncomingMessage, res: ServerResponse, body: unknown): boolean;
  /** Answers any other route; returns false when the route is unknown. */
  handleOther?(req: IncomingMessage, res: ServerResponse): boolean;
  reset?(): void;
}

export const NO_TURN_MESSAGE = "fake LLM: no scripted turn left";

export function textTurn(text: string): FakeTurn {
  return { content: [{ type: "text", text }] };
}

export function toolTurn(name: string, input: Record<string, unknown>, text?: string): FakeTurn {
  const tool: FakeBlock = { type: "tool_use", name, input };
  return { content: text === undefined ? [tool] : [{ type: "text", text }, tool] };
}

export function stopReasonOf(turn: FakeTurn): "end_turn" | "tool_use" | "max_tokens" {
  if (turn.stopReason) return turn.stopReason;
  return turn.content.some((block) => block.type === "tool_use") ? "tool_use" : "end_turn";
}

/** Token estimate used by the fakes: a quarter of the character count, rounded up. */
export function tokensForChars(chars: number): number {
  return Math.ceil(chars / 4);
}

export function estimateTokens(value: unknown): number {
  return tokensForChars(JSON.stringify(value ?? "").length);
}

/** Output tokens of a turn: its generated text, thinking and tool calls (at least 1). */
export function outputTokens(turn: FakeTurn): number {
  let chars = 0;
  for (const block of turn.content) {
    if (block.type === "text") chars += block.text.length;
    else if (block.type === "thinking") chars += block.thinking.length;
    else chars += block.name.length + JSON.stringify(block.input).length;
  }
  return Math.max(1, tokensForChars(chars));
}

/** Splits a string into up to three pieces (two or more when it has at least two characters). */
export function splitPieces(text: string): string[] {
  const chars = Array.from(text);
  const size = Math.max(1, Math.ceil(chars.length / 3));
  const pieces: string[] = [];
  for (let i = 0; i < chars.length; i += size) pieces.push(chars.slice(i, i + size).join(""));
  return pieces;
}

export function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

export function asArray(value: unknown): unknown[] {
  return Array.isArray(value) ? value : [];
}

/** Text of a string or of the {type:"text"} parts of an array. */
export function flattenText(content: unknown): string {
  if (typeof content === "string") return content;
  const texts: string[] = [];
  for (const part of asArray(content)) {
    if (isRecord(part) && part.type === "text" && typeof part.text === "string") texts.push(part.text);
  }
  return texts.join("\n");
}

/** Resolves after `ms` (immediately for 0) or as soon as `signal` aborts. */
export function pause(ms: number | undefined, signal: AbortSignal): Promise<void> {
  if (!ms || signal.aborted) return Promise.resolve();
  return new Promise((resolve) => {
    const timer = setTimeout(done, ms);
    signal.addEventListener("abort", done, { once: true });
    function done(): void {
      clearTimeout(timer);
      signal.removeEventListener("abort", done);
      resolve();
    }
  });
}

export function sendJson(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(text) });
  res.end(text);
}

export function errorBody(message: string): unknown {
  return { type: "error", error: { type: "api_error", message } };
}

function waitForGate(gate: Promise<unknown>, signal: AbortSignal): Promise<void> {
  if (signal.aborted) return Promise.resolve();
  return new Promise((resolve) => {
    const done = (): void => {
      signal.removeEventListener("abort", done);
      resolve();
    };
    signal.addEventListener("abort", done, { once: true });
    gate.then(done, done);
  });
}

function disconnectSignal(res: ServerResponse): AbortSignal {
  const controller = new AbortController();
  res.on("close", () => {
    if (!res.writableFinished) controller.abort();
  });
  return controller.signal;
}

async function readJson(req: IncomingMessage): Promise<unknown> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  const text = Buffer.concat(chunks).toString("utf8");
  return text ? JSON.parse(text) : {};
}

/** Starts a fake LLM HTTP server on 127.0.0.1 with a random port for the given protocol. */
export async function startFakeLlmServer(protocol: FakeProtocol): Promise<FakeLlmServer> {
  const requests: RecordedRequest[] = [];
  const queue: FakeTurn[] = [];
  let responder: Responder | undefined;

  async function nextTurn(request: RecordedRequest): Promise<FakeTurn | undefined> {
    if (responder) return responder(request);
    return queue.shift();
  }

  async function answer(req: IncomingMessage, res: ServerResponse, path: string): Promise<void> {
    const signal = disconnectSignal(res);
    let body: unknown;
    try {
      body = await readJson(req);
    } catch {
      sendJson(res, 400, errorBody("fake LLM: request body is not valid JSON"));
      return;
    }
    const request: RecordedRequest = {
      path,
      headers: { ...req.headers },
      body,
      lastUserText: protocol.lastUserText(body),
    };
    requests.push(request);
    if (protocol.refuse?.(req, res, body)) return;
    const turn = await nextTurn(request);
    if (!turn) {
      sendJson(res, 500, errorBody(NO_TURN_MESSAGE));
      return;
    }
    if (turn.gate) await waitForGate(turn.gate, signal);
    if (signal.aborted) return;
    if (turn.error) sendJson(res, turn.error.status, turn.error.body);
    else await protocol.writeTurn(res, turn, body, signal);
  }

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const path = new URL(req.url ?? "/", "http://localhost").pathname;
    try {
      if (req.method === "POST" && path === protocol.completionPath) await answer(req, res, path);
      else if (!protocol.handleOther?.(req, res)) {
        sendJson(res, 404, errorBody(`fake LLM: no route for ${req.method} ${path}`));
      }
    } catch (error) {
      const message = `fake LLM: ${error instanceof Error ? error.message : String(error)}`;
      if (res.headersSent) res.destroy();
      else sendJson(res, 500, errorBody(message));
    }
  }

  const server = createServer((req, res) => void handle(req, res));
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => resolve());
  });
  const { port } = server.address() as AddressInfo;

  return {
    url: `http://127.0.0.1:${port}`,
    requests,
    enqueue: (...turns) => void queue.push(...turns),
    setResponder: (next) => void (responder = next),
    reset() {
      queue.length = 0;
      requests.length = 0;
      responder = undefined;
      protocol.reset?.();
    },
    close() {
      return new Promise((resolve, reject) => {
        server.close((error) => (error ? reject(error) : resolve()));
        server.closeAllConnections();
      });
    },
  };
}

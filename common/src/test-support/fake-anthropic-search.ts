import { randomBytes } from "node:crypto";
import { createServer } from "node:http";
import type { IncomingMessage, ServerResponse } from "node:http";
import { listen } from "../http/serve.js";
import { estimateTokens, isRecord, sendJson, tokensForChars } from "./fake-llm.js";

/**
 * A fake of Anthropic's Messages API as the web tools use it: `POST /v1/messages`, not streamed,
 * answering scripted replies that may carry server-side web search blocks (`server_tool_use`,
 * `web_search_tool_result`, text with citations), `pause_turn`, or an error status with
 * Anthropic's error body. Every request is recorded.
 */

export interface FakeSearchResult {
  url: string;
  title: string;
  pageAge?: string;
}

export type FakeSearchReply = (
  | { content: unknown[]; stopReason?: string; usage?: { input_tokens: number; output_tokens: number } }
  | { status: number; body: unknown }
) & {
  /** Wait for this before answering (stops waiting if the client goes away). */
  gate?: Promise<unknown>;
};

export interface FakeSearchRequest {
  headers: Record<string, string | string[] | undefined>;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  body: any;
}

export interface FakeAnthropicSearch {
  /** Base URL without "/v1", e.g. "http://127.0.0.1:41234". */
  url: string;
  requests: FakeSearchRequest[];
  /** Scripted replies, consumed in order; with none left the fake answers 500. */
  enqueue(...replies: FakeSearchReply[]): void;
  reset(): void;
  close(): Promise<void>;
}

const toolUseId = () => `srvtoolu_fake_${randomBytes(8).toString("hex")}`;

/** A search the model ran and its results, as the API puts them in the assistant content. */
export function searchBlocks(query: string, results: FakeSearchResult[]): unknown[] {
  const id = toolUseId();
  return [
    { type: "server_tool_use", id, name: "web_search", input: { query } },
    {
      type: "web_search_tool_result",
      tool_use_id: id,
      content: results.map((result) => ({
        type: "web_search_result",
        url: result.url,
        title: result.title,
        encrypted_content: Buffer.from(`${result.url} ${result.title}`).toString("base64"),
        page_age: result.pageAge ?? null,
      })),
    },
  ];
}

/** A search that failed (e.g. "max_uses_exceeded", "too_many_requests", "unavailable"). */
export function searchErrorBlocks(query: string, errorCode: string): unknown[] {
  const id = toolUseId();
  return [
    { type: "server_tool_use", id, name: "web_search", input: { query } },
    {
      type: "web_search_tool_result",
      tool_use_id: id,
      content: { type: "web_search_tool_result_error", error_code: errorCode },
    },
  ];
}

/** A text block citing a search result, as the API sends cited prose. */
export function citedText(text: string, source: FakeSearchResult): unknown {
  return {
    type: "text",
    text,
    citations: [
      {
        type: "web_search_result_location",
        url: source.url,
        title: source.title,
        encrypted_index: Buffer.from(source.url).toString("base64"),
        cited_text: text.slice(0, 150),
      },
    ],
  };
}

export function searchReply(content: unknown[], stopReason = "end_turn"): FakeSearchReply {
  return { content, stopReason };
}

/** An error as Anthropic sends it, e.g. (529, "overloaded_error", "Overloaded"). */
export function anthropicErrorReply(status: number, type: string, message: string): FakeSearchReply {
  return { status, body: { type: "error", error: { type, message } } };
}

function usageOf(body: unknown, content: unknown[]): Record<string, unknown> {
  let chars = 0;
  let searches = 0;
  for (const block of content) {
    if (!isRecord(block)) continue;
    if (block.type === "text" && typeof block.text === "string") chars += block.text.length;
    if (block.type === "server_tool_use" && block.name === "web_search") searches++;
  }
  return {
    input_tokens: estimateTokens(body),
    output_tokens: Math.max(1, tokensForChars(chars)),
    server_tool_use: { web_search_requests: searches },
  };
}

/** The checks the real API makes first, so a client that gets them wrong fails here too. */
function invalid(req: IncomingMessage, body: unknown): [number, string, string] | undefined {
  if (!req.headers["x-api-key"]) return [401, "authentication_error", "x-api-key header is required"];
  if (!req.headers["anthropic-version"]) {
    return [400, "invalid_request_error", "anthropic-version: header is required"];
  }
  if (!isRecord(body)) return [400, "invalid_request_error", "request body must be a JSON object"];
  for (const field of ["model", "max_tokens", "messages"]) {
    if (body[field] === undefined) return [400, "invalid_request_error", `${field}: Field required`];
  }
  return undefined;
}

function whenDone(gate: Promise<unknown>, res: ServerResponse): Promise<void> {
  return new Promise((resolve) => {
    res.once("close", () => resolve());
    gate.then(
      () => resolve(),
      () => resolve(),
    );
  });
}

export async function startFakeAnthropicSearch(): Promise<FakeAnthropicSearch> {
  const requests: FakeSearchRequest[] = [];
  const queue: FakeSearchReply[] = [];
  let messageIds = 0;

  async function answer(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    let body: unknown;
    try {
      body = JSON.parse(Buffer.concat(chunks).toString("utf8"));
    } catch {
      body = undefined;
    }
    const problem = invalid(req, body);
    if (problem) {
      sendJson(res, problem[0], { type: "error", error: { type: problem[1], message: problem[2] } });
      return;
    }
    requests.push({ headers: { ...req.headers }, body });
    const reply = queue.shift();
    if (!reply) {
      sendJson(res, 500, {
        type: "error",
        error: { type: "api_error", message: "fake: no scripted reply left" },
      });
      return;
    }
    if (reply.gate) await whenDone(reply.gate, res);
    if (res.destroyed) return;
    if ("status" in reply) {
      // A string body is sent as it is, like the HTML error page of a gateway in front of the API.
      if (typeof reply.body === "string")
        res.writeHead(reply.status, { "content-type": "text/html" }).end(reply.body);
      else sendJson(res, reply.status, reply.body);
      return;
    }
    sendJson(res, 200, {
      id: `msg_fake_search_${++messageIds}`,
      type: "message",
      role: "assistant",
      model: isRecord(body) ? body.model : undefined,
      content: reply.content,
      stop_reason: reply.stopReason ?? "end_turn",
      stop_sequence: null,
      usage: reply.usage ?? usageOf(body, reply.content),
    });
  }

  const server = createServer((req, res) => {
    const path = new URL(req.url ?? "/", "http://localhost").pathname;
    if (req.method !== "POST" || path !== "/v1/messages") {
      sendJson(res, 404, { type: "error", error: { type: "not_found_error", message: `no route ${path}` } });
      return;
    }
    answer(req, res).catch(() => res.destroy());
  });
  const port = await listen(server, 0);
  return {
    url: `http://127.0.0.1:${port}`,
    requests,
    enqueue: (...replies) => void queue.push(...replies),
    reset() {
      requests.length = 0;
      queue.length = 0;
    },
    close: () =>
      new Promise((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

/**
 * The assistant's own path to Anthropic's Messages API, used for turns instead of pi-ai's
 * provider when the model speaks that API with an API key. It sends what pi-ai would send and
 * gives back what pi-ai would give back, but it keeps each history message's JSON between requests
 * (`messages.ts`), writes the body as bytes on a kept-alive connection, and reads the answer from
 * Node's own HTTP stream: pi-ai's path converts and encodes the whole history again for every
 * model call and goes through the Anthropic SDK and `fetch`, which was most of a turn's cost here
 * (see DECISIONLOG.md). Retries are the SDK's: twice, on connection failures, 408, 409, 429 and
 * 5xx (or as `x-should-retry` says), after `retry-after(-ms)` or a growing pause.
 *
 * Left to pi-ai: other APIs, subscription (OAuth) tokens, whose requests must look like Claude
 * Code's, and the Copilot and Cloudflare gateways with their own authentication.
 */
import { Agent as HttpAgent, request as httpRequest, type IncomingMessage } from "node:http";
import { Agent as HttpsAgent, request as httpsRequest } from "node:https";
import { Readable } from "node:stream";
import {
  createAssistantMessageEventStream,
  type Api,
  type AssistantMessageEventStream,
  type Context,
  type Model,
  type SimpleStreamOptions,
} from "@mariozechner/pi-ai";
import { AnswerBuilder, SseDecoder, emptyAnswer } from "./events.js";
import { MessageWire } from "./messages.js";
import { buildRequest, type WireRequest } from "./request.js";

export interface WireStreamOptions extends SimpleStreamOptions {
  /** Called when the request is about to leave (everything before it can only fail the same way again). */
  onRequest?: () => void;
}

const DEFAULT_TIMEOUT_MS = 600_000;
const DEFAULT_MAX_RETRIES = 2;
const RETRY_AFTER_LIMIT_MS = 60_000;

class AbortedError extends Error {
  constructor() {
    super("Request was aborted.");
  }
}

function sleep(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(new AbortedError());
    const onAbort = () => {
      clearTimeout(timer);
      reject(new AbortedError());
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

function header(response: IncomingMessage, name: string): string | undefined {
  const value = response.headers[name];
  return Array.isArray(value) ? value[0] : value;
}

function shouldRetry(response: IncomingMessage): boolean {
  const told = header(response, "x-should-retry");
  if (told === "true") return true;
  if (told === "false") return false;
  const status = response.statusCode ?? 0;
  return status === 408 || status === 409 || status === 429 || status >= 500;
}

/** How long to wait before retry number `retry` (1-based), as the server asks or growing. */
function retryDelayMs(response: IncomingMessage | undefined, retry: number): number {
  let wanted: number | undefined;
  const ms = response && Number.parseFloat(header(response, "retry-after-ms") ?? "");
  if (ms !== undefined && !Number.isNaN(ms)) wanted = ms;
  const after = response && header(response, "retry-after");
  if (wanted === undefined && after) {
    const seconds = Number.parseFloat(after);
    wanted = Number.isNaN(seconds) ? Date.parse(after) - Date.now() : seconds * 1000;
  }
  if (wanted !== undefined && wanted >= 0 && wanted < RETRY_AFTER_LIMIT_MS) return wanted;
  const seconds = Math.min(0.5 * 2 ** (retry - 1), 8);
  return seconds * (1 - Math.random() * 0.25) * 1000;
}

/** The SDK's text for an error answer: "<status> <body>", the body's `message` when it has one. */
export function statusErrorText(status: number, body: string): string {
  let parsed: unknown;
  try {
    parsed = JSON.parse(body);
  } catch {
    parsed = undefined;
  }
  const inner = (parsed as { message?: unknown } | null | undefined)?.message;
  const detail = inner
    ? typeof inner === "string"
      ? inner
      : JSON.stringify(inner)
    : parsed
      ? JSON.stringify(parsed)
      : body;
  return detail ? `${status} ${detail}` : `${status} status code (no body)`;
}

function readText(response: IncomingMessage): Promise<string> {
  return new Promise((resolve) => {
    let text = "";
    response.setEncoding("utf8");
    response.on("data", (chunk: string) => (text += chunk));
    response.on("end", () => resolve(text));
    response.on("error", () => resolve(text));
  });
}

/** Talks to Messages API endpoints over kept-alive connections. Close it when the app stops. */
export class AnthropicWire {
  private readonly messages = new MessageWire();
  private readonly http = new HttpAgent({ keepAlive: true });
  private readonly https = new HttpsAgent({ keepAlive: true });

  /** Whether this path serves `model` with `apiKey`; otherwise pi-ai's provider does. */
  static handles(model: Model<Api>, apiKey: string | undefined): boolean {
    return (
      model.api === "anthropic-messages" &&
      model.provider !== "github-copilot" &&
      model.provider !== "cloudflare-ai-gateway" &&
      typeof apiKey === "string" &&
      apiKey.length > 0 &&
      !apiKey.includes("sk-ant-oat")
    );
  }

  /** A `StreamFn`: the model's answer to `context`, as pi-ai's `streamSimple` reports it. */
  stream(model: Model<Api>, context: Context, options: WireStreamOptions): AssistantMessageEventStream {
    const stream = createAssistantMessageEventStream();
    void this.run(model, context, options, stream);
    return stream;
  }

  /**
   * A model call made as `stream` makes it, answered by `answer` (an event stream's text) instead
   * of the network: the request is built, its history's encoding kept for the next request, and
   * the answer read. A start runs a first turn's code this way before anyone waits for it.
   */
  rehearse(
    model: Model<Api>,
    context: Context,
    options: WireStreamOptions,
    answer: string,
  ): AssistantMessageEventStream {
    const stream = createAssistantMessageEventStream();
    void this.run(model, context, options, stream, async () => cannedResponse(answer));
    return stream;
  }

  /**
   * Opens a connection to the host of `baseUrl` before the first turn needs one: a HEAD request to
   * the host's root, with no credentials and no effect, whose connection stays in this path's pool
   * while the host keeps it alive. Never throws.
   */
  preconnect(baseUrl: string): Promise<void> {
    return new Promise((resolve) => {
      try {
        const url = new URL(new URL(baseUrl).origin);
        const secure = url.protocol === "https:";
        const req = (secure ? httpsRequest : httpRequest)(url, {
          method: "HEAD",
          agent: secure ? this.https : this.http,
          timeout: 5_000,
        });
        req.once("response", (response) => {
          response.resume();
          // The socket goes back to the pool just after the end: then the connection is ready.
          response.once("end", () => setImmediate(resolve));
          response.once("error", () => resolve());
        });
        req.once("timeout", () => req.destroy());
        req.once("error", () => resolve());
        req.end();
      } catch {
        resolve();
      }
    });
  }

  /**
   * One JSON POST on this path's kept-alive connections (the web tools' Messages calls, which need
   * server tools pi-ai does not expose): the status and the body's text, whatever the status.
   * Rejects on a connection failure, a timeout or an abort, saying which.
   */
  async postJson(
    url: URL,
    headers: Record<string, string>,
    body: string,
    options: { timeoutMs: number; signal?: AbortSignal | undefined },
  ): Promise<{ status: number; text: string }> {
    const request: WireRequest = { url, headers, body: Buffer.from(body) };
    const response = await this.post(request, options.timeoutMs, options.signal);
    const text = await readText(response);
    if (options.signal?.aborted) throw new AbortedError();
    return { status: response.statusCode ?? 0, text };
  }

  close(): void {
    this.http.destroy();
    this.https.destroy();
  }

  private async run(
    model: Model<Api>,
    context: Context,
    options: WireStreamOptions,
    stream: AssistantMessageEventStream,
    respond = (request: WireRequest) => this.send(request, options),
  ): Promise<void> {
    const output = emptyAnswer(model);
    const signal = options.signal;
    try {
      const request = buildRequest(
        model,
        context,
        { ...options, apiKey: options.apiKey ?? "" },
        this.messages,
      );
      options.onRequest?.();
      const response = await respond(request);
      await options.onResponse?.({ status: response.statusCode ?? 0, headers: flatHeaders(response) }, model);
      stream.push({ type: "start", partial: output });
      await this.read(response, new AnswerBuilder(model, output, stream), signal);
      if (signal?.aborted) throw new AbortedError();
      if (output.stopReason === "aborted" || output.stopReason === "error") {
        throw new Error("An unknown error occurred");
      }
      stream.push({ type: "done", reason: output.stopReason, message: output });
    } catch (error) {
      AnswerBuilder.tidy(output);
      output.stopReason = signal?.aborted ? "aborted" : "error";
      output.errorMessage = error instanceof Error ? error.message : JSON.stringify(error);
      stream.push({ type: "error", reason: output.stopReason, error: output });
    }
    stream.end();
  }

  /** Sends the request until it is answered with a 2xx, or retries are used up (then throws). */
  private async send(request: WireRequest, options: WireStreamOptions): Promise<IncomingMessage> {
    const maxRetries = options.maxRetries ?? DEFAULT_MAX_RETRIES;
    for (let retry = 1; ; retry++) {
      if (options.signal?.aborted) throw new AbortedError();
      let response: IncomingMessage;
      try {
        response = await this.post(request, options.timeoutMs ?? DEFAULT_TIMEOUT_MS, options.signal);
      } catch (error) {
        if (options.signal?.aborted) throw new AbortedError();
        if (retry > maxRetries) throw error;
        await sleep(retryDelayMs(undefined, retry), options.signal);
        continue;
      }
      const status = response.statusCode ?? 0;
      if (status >= 200 && status < 300) return response;
      if (retry <= maxRetries && shouldRetry(response)) {
        response.resume();
        await sleep(retryDelayMs(response, retry), options.signal);
        continue;
      }
      throw new Error(statusErrorText(status, await readText(response)));
    }
  }

  /** One POST, resolved with the response once its headers arrive. */
  private post(
    request: WireRequest,
    timeoutMs: number,
    signal: AbortSignal | undefined,
  ): Promise<IncomingMessage> {
    return new Promise((resolve, reject) => {
      const secure = request.url.protocol === "https:";
      const req = (secure ? httpsRequest : httpRequest)(request.url, {
        method: "POST",
        agent: secure ? this.https : this.http,
        headers: { ...request.headers, "content-length": String(request.body.length) },
      });
      let timedOut = false;
      const timer = setTimeout(() => {
        timedOut = true;
        req.destroy();
      }, timeoutMs);
      const onAbort = () => req.destroy();
      signal?.addEventListener("abort", onAbort, { once: true });
      const settle = () => {
        clearTimeout(timer);
        signal?.removeEventListener("abort", onAbort);
      };
      req.once("response", (response) => {
        settle();
        // An abort while the answer streams ends it too.
        if (signal) {
          const stop = () => response.destroy(new AbortedError());
          signal.addEventListener("abort", stop, { once: true });
          response.once("close", () => signal.removeEventListener("abort", stop));
        }
        resolve(response);
      });
      req.once("error", () => {
        settle();
        reject(new Error(timedOut ? "Request timed out." : "Connection error."));
      });
      req.end(request.body);
    });
  }

  /** Reads the event stream to its end into `builder`. */
  private read(
    response: IncomingMessage,
    builder: AnswerBuilder,
    signal: AbortSignal | undefined,
  ): Promise<void> {
    return new Promise((resolve, reject) => {
      let failed = false;
      const fail = (error: unknown) => {
        if (failed) return;
        failed = true;
        response.destroy();
        reject(signal?.aborted ? new AbortedError() : error);
      };
      const decoder = new SseDecoder((name, data, raw) => builder.event(name, data, raw));
      response.setEncoding("utf8");
      response.on("data", (chunk: string) => {
        if (failed) return;
        try {
          decoder.push(chunk);
        } catch (error) {
          fail(error);
        }
      });
      response.once("end", () => {
        if (failed) return;
        try {
          decoder.end();
          builder.end();
          resolve();
        } catch (error) {
          fail(error);
        }
      });
      const cut = () => fail(new Error("The connection closed before the answer was complete."));
      response.once("error", cut);
      response.once("close", () => {
        if (!response.complete) cut();
      });
    });
  }
}

/** A 200 answer carrying `body`, read the way a response from the network is. */
function cannedResponse(body: string): IncomingMessage {
  const response = Readable.from([Buffer.from(body)], { objectMode: false });
  return Object.assign(response, {
    statusCode: 200,
    headers: { "content-type": "text/event-stream" },
    complete: true,
  }) as unknown as IncomingMessage;
}

function flatHeaders(response: IncomingMessage): Record<string, string> {
  const headers: Record<string, string> = {};
  for (const [name, value] of Object.entries(response.headers)) {
    if (value !== undefined) headers[name] = Array.isArray(value) ? value.join(", ") : value;
  }
  return headers;
}

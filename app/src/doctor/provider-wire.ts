/**
 * What the provider check asks a model's provider, on its own wire: whether it knows the model
 * (Messages API: `GET /v1/models/{id}`, which resolves aliases, and `GET /v1/models` for the list;
 * OpenAI-compatible: `GET /models`), free of tokens; and, where a server has no model list, one
 * tiny real request (a one-token answer to "Hi").
 */
import type { Api, Model } from "@mariozechner/pi-ai";
import { errorMessage } from "@stavrobot/common";

const TIMEOUT_MS = 5_000;
/** Anthropic's list comes in pages of up to 1,000: a few are more than any account has. */
const MAX_PAGES = 5;

/** What the provider said about the model. */
export type ModelLookup =
  /** It knows the model (lists it, or resolves it as an alias). */
  | { kind: "known" }
  /** It lists its models, and this is not one of them. */
  | { kind: "unknown"; ids: string[] }
  /** `url` answered 404: a server without a model list (some proxies and local servers), or a wrong address. */
  | { kind: "no-list"; url: string }
  /** It refused the key (401 or 403). */
  | { kind: "refused"; status: number }
  /** Any other answer. */
  | { kind: "trouble"; url: string; status: number; message: string | undefined }
  /** Its API has no free question to ask (only the key is checked). */
  | { kind: "not-asked" };

/** What a one-token request said. */
export type ProbeAnswer =
  | { kind: "answered" }
  | { kind: "refused"; status: number }
  /** 404 naming the model: the server is there, the model is not. */
  | { kind: "unknown-model"; message: string }
  /** 404 without a word of the model: nothing serves this address. */
  | { kind: "wrong-address"; url: string }
  | { kind: "trouble"; url: string; status: number; message: string | undefined };

/** The provider did not answer at all (refused connection, timeout, a name that does not resolve). */
export class NoAnswer extends Error {
  constructor(
    readonly url: string,
    cause: unknown,
  ) {
    super(`${url} did not answer (${errorMessage(cause)})`);
  }
}

interface Answer {
  status: number;
  body: unknown;
}

async function ask(url: string, init: RequestInit): Promise<Answer> {
  try {
    const response = await fetch(url, { ...init, signal: AbortSignal.timeout(TIMEOUT_MS) });
    const text = await response.text();
    let body: unknown = text;
    try {
      body = JSON.parse(text);
    } catch {
      // Not JSON (a proxy's HTML page): kept as text.
    }
    return { status: response.status, body };
  } catch (error) {
    throw new NoAnswer(url, error);
  }
}

const record = (value: unknown): Record<string, unknown> =>
  typeof value === "object" && value !== null ? (value as Record<string, unknown>) : {};

/** An error body's message, as Anthropic, OpenAI and most compatible servers shape it. */
function errorText(body: unknown): string | undefined {
  const error = record(body).error;
  if (typeof error === "string") return error;
  const message = record(error).message ?? record(body).message;
  if (typeof message === "string") return message;
  return typeof body === "string" && body.trim() ? body.trim().slice(0, 200) : undefined;
}

const base = (model: Model<Api>): string => model.baseUrl.replace(/\/+$/, "");

function anthropicHeaders(key: string): Record<string, string> {
  // A subscription's OAuth token goes as a bearer token, an API key in x-api-key.
  const auth: Record<string, string> = key.startsWith("sk-ant-oat")
    ? { Authorization: `Bearer ${key}`, "anthropic-beta": "oauth-2025-04-20" }
    : { "x-api-key": key };
  return { ...auth, "anthropic-version": "2023-06-01" };
}

const isOpenAi = (api: string): boolean => api === "openai-completions" || api === "openai-responses";

/** Asks the provider whether it knows `model` (free: no tokens). Throws NoAnswer when it does not answer. */
export async function lookUpModel(model: Model<Api>, key: string): Promise<ModelLookup> {
  if (model.api === "anthropic-messages") return lookUpAnthropic(model, key);
  if (isOpenAi(model.api)) return lookUpOpenAi(model, key);
  return { kind: "not-asked" };
}

async function lookUpAnthropic(model: Model<Api>, key: string): Promise<ModelLookup> {
  const headers = anthropicHeaders(key);
  const one = `${base(model)}/v1/models/${encodeURIComponent(model.id)}`;
  const answer = await ask(one, { headers });
  if (answer.status === 200) return { kind: "known" };
  if (answer.status === 401 || answer.status === 403) return { kind: "refused", status: answer.status };
  // Anthropic's own "no such model" is a not_found_error; any other 404 is a server without the route.
  const notFound = record(record(answer.body).error).type === "not_found_error";
  if (answer.status !== 404 && !notFound) return trouble(one, answer);
  const ids: string[] = [];
  let after: string | undefined;
  for (let page = 0; page < MAX_PAGES; page++) {
    const url = `${base(model)}/v1/models?limit=1000${after ? `&after_id=${encodeURIComponent(after)}` : ""}`;
    const list = await ask(url, { headers });
    if (list.status === 404) return { kind: "no-list", url };
    if (list.status === 401 || list.status === 403) return { kind: "refused", status: list.status };
    if (list.status !== 200) return trouble(url, list);
    const body = record(list.body);
    for (const entry of Array.isArray(body.data) ? body.data : []) {
      const id = record(entry).id;
      if (typeof id === "string") ids.push(id);
    }
    if (body.has_more !== true || typeof body.last_id !== "string") break;
    after = body.last_id;
  }
  // A server whose single-model route is missing but whose list has the model knows it.
  if (ids.includes(model.id)) return { kind: "known" };
  return { kind: "unknown", ids };
}

async function lookUpOpenAi(model: Model<Api>, key: string): Promise<ModelLookup> {
  const url = `${base(model)}/models`;
  const answer = await ask(url, { headers: { Authorization: `Bearer ${key}` } });
  if (answer.status === 401 || answer.status === 403) return { kind: "refused", status: answer.status };
  if (answer.status === 404) return { kind: "no-list", url };
  if (answer.status !== 200) return trouble(url, answer);
  const data = record(answer.body).data;
  const ids = (Array.isArray(data) ? data : []).flatMap((entry) => {
    const id = record(entry).id;
    return typeof id === "string" ? [id] : [];
  });
  return ids.includes(model.id) ? { kind: "known" } : { kind: "unknown", ids };
}

function trouble(
  url: string,
  answer: Answer,
): { kind: "trouble"; url: string; status: number; message: string | undefined } {
  return { kind: "trouble", url, status: answer.status, message: errorText(answer.body) };
}

/** The one-token request for `model`'s API: its address and body. */
function probeRequest(model: Model<Api>, key: string): { url: string; init: RequestInit } | undefined {
  const hi = [{ role: "user", content: "Hi" }];
  const json = { "content-type": "application/json" };
  if (model.api === "anthropic-messages") {
    return {
      url: `${base(model)}/v1/messages`,
      init: {
        method: "POST",
        headers: { ...anthropicHeaders(key), ...json },
        body: JSON.stringify({ model: model.id, max_tokens: 1, messages: hi }),
      },
    };
  }
  const headers = { Authorization: `Bearer ${key}`, ...json };
  if (model.api === "openai-completions") {
    return {
      url: `${base(model)}/chat/completions`,
      init: {
        method: "POST",
        headers,
        body: JSON.stringify({ model: model.id, max_tokens: 1, messages: hi }),
      },
    };
  }
  if (model.api === "openai-responses") {
    // The Responses API's smallest allowed output is 16 tokens.
    return {
      url: `${base(model)}/responses`,
      init: {
        method: "POST",
        headers,
        body: JSON.stringify({ model: model.id, max_output_tokens: 16, input: "Hi" }),
      },
    };
  }
  return undefined;
}

/**
 * Sends `model` one tiny real request (a token or so of output): for a server without a model
 * list, the one way to learn that the address, the key and the model work. Throws NoAnswer.
 */
export async function probeModel(model: Model<Api>, key: string): Promise<ProbeAnswer> {
  const request = probeRequest(model, key);
  if (!request) return { kind: "answered" };
  const answer = await ask(request.url, request.init);
  if (answer.status >= 200 && answer.status < 300) return { kind: "answered" };
  if (answer.status === 401 || answer.status === 403) return { kind: "refused", status: answer.status };
  const message = errorText(answer.body);
  if (answer.status === 404) {
    // "model: x" (Anthropic), "The model `x` does not exist" (OpenAI), "model "x" not found" (Ollama).
    const aboutModel = typeof answer.body === "object" && message !== undefined && /model/i.test(message);
    return aboutModel ? { kind: "unknown-model", message } : { kind: "wrong-address", url: request.url };
  }
  return { kind: "trouble", url: request.url, status: answer.status, message };
}

import { createHash } from "node:crypto";
import { errorMessage } from "@stavrobot/common";
import type { EmbeddingsConfig } from "../boot/config.js";

/**
 * Why a call to the embeddings endpoint failed, in words for the owner:
 * - `refused`: the provider refused these inputs (HTTP 400/413/422); another input may pass.
 * - `setup`: the key, the URL or the model is wrong (401, 403, 404, an answer that is not
 *   embeddings); nothing passes until config.toml is corrected.
 * - `transient`: rate limit, server error, no answer; the same call may pass later.
 */
export class EmbeddingsError extends Error {
  constructor(
    readonly kind: "refused" | "setup" | "transient",
    message: string,
    readonly status?: number,
  ) {
    super(message);
    this.name = "EmbeddingsError";
  }
}

/** At most this many inputs, and about this many characters, in one request. */
export const MAX_BATCH_INPUTS = 64;
export const MAX_BATCH_CHARS = 120_000;
/** One indexed text is cut to this (about 2,000 tokens, under every model's input limit). */
export const MAX_INPUT_CHARS = 8_000;

export interface EmbeddingsClient {
  /**
   * `provider:model:dimensions` (and a mark of the document prefix when there is one): vectors
   * are compared only with vectors made under the same identity.
   */
  identity: string;
  /** Where the requests go, for messages. */
  endpoint: string;
  /** Unit-length vectors of the texts, in order (split into requests of at most MAX_BATCH_INPUTS). */
  embed(texts: readonly string[], kind: "query" | "document", signal?: AbortSignal): Promise<Float32Array[]>;
}

export function embeddingsIdentity(config: EmbeddingsConfig): string {
  const host = new URL(config.baseUrl).host;
  const base = `${host}:${config.model}:${config.dimensions ?? "native"}`;
  if (!config.documentPrefix) return base;
  return `${base}:${createHash("sha256").update(config.documentPrefix).digest("hex").slice(0, 8)}`;
}

/** The client for `POST {baseUrl}/embeddings` as OpenAI defines it. */
export function createEmbeddingsClient(
  config: EmbeddingsConfig,
  options: { timeoutMs?: number; fetch?: typeof fetch } = {},
): EmbeddingsClient {
  const endpoint = `${config.baseUrl.replace(/\/+$/, "")}/embeddings`;
  const doFetch = options.fetch ?? fetch;
  const timeoutMs = options.timeoutMs ?? 60_000;

  async function request(inputs: string[], signal?: AbortSignal): Promise<Float32Array[]> {
    const body: Record<string, unknown> = { model: config.model, input: inputs, encoding_format: "float" };
    if (config.dimensions !== undefined) body.dimensions = config.dimensions;
    const headers: Record<string, string> = { "Content-Type": "application/json" };
    if (config.apiKey) headers.Authorization = `Bearer ${config.apiKey}`;
    const timeout = AbortSignal.timeout(timeoutMs);
    let response: Response;
    try {
      response = await doFetch(endpoint, {
        method: "POST",
        headers,
        body: JSON.stringify(body),
        signal: signal ? AbortSignal.any([signal, timeout]) : timeout,
      });
    } catch (error) {
      if (signal?.aborted) throw error;
      throw new EmbeddingsError("transient", `${endpoint} did not answer: ${errorMessage(error)}`);
    }
    const text = await response.text().catch(() => "");
    if (!response.ok) throw failure(response.status, text);
    let parsed: unknown;
    try {
      parsed = JSON.parse(text);
    } catch {
      throw new EmbeddingsError(
        "setup",
        `${endpoint} answered something that is not JSON: check [embeddings] baseUrl in config.toml (it usually ends in /v1).`,
      );
    }
    return vectorsOf(parsed, inputs.length);
  }

  function failure(status: number, text: string): EmbeddingsError {
    const said = providerMessage(text);
    const quoted = said ? `: ${said}` : "";
    if (status === 401 || status === 403)
      return new EmbeddingsError(
        "setup",
        `the embeddings provider refused the key (HTTP ${status}${quoted}). Check [embeddings] apiKey in config.toml.`,
        status,
      );
    if (status === 404)
      return new EmbeddingsError(
        "setup",
        `${endpoint} or the model "${config.model}" was not found (HTTP 404${quoted}). Check [embeddings] baseUrl and model in config.toml.`,
        status,
      );
    if (status === 400 || status === 413 || status === 422)
      return new EmbeddingsError(
        "refused",
        `the embeddings provider refused the input (HTTP ${status}${quoted})`,
        status,
      );
    return new EmbeddingsError(
      "transient",
      `the embeddings provider answered HTTP ${status}${quoted}`,
      status,
    );
  }

  function vectorsOf(parsed: unknown, count: number): Float32Array[] {
    const data = (parsed as { data?: unknown }).data;
    const wrong = (why: string) =>
      new EmbeddingsError(
        "setup",
        `${endpoint} did not answer embeddings (${why}): check [embeddings] baseUrl and model in config.toml.`,
      );
    if (!Array.isArray(data)) throw wrong("no data list");
    if (data.length !== count) throw wrong(`${data.length} vectors for ${count} inputs`);
    const vectors: Float32Array[] = new Array<Float32Array>(count);
    data.forEach((item: { index?: unknown; embedding?: unknown }, position) => {
      const index = typeof item.index === "number" ? item.index : position;
      if (!Array.isArray(item.embedding) || !item.embedding.every((value) => typeof value === "number"))
        throw wrong("an embedding that is not a list of numbers; base64 encoding is not read");
      if (index < 0 || index >= count || vectors[index]) throw wrong("indexes out of order");
      vectors[index] = normalised(item.embedding as number[]);
    });
    return vectors;
  }

  return {
    identity: embeddingsIdentity(config),
    endpoint,
    async embed(texts, kind, signal) {
      const prefix = kind === "query" ? config.queryPrefix : config.documentPrefix;
      const inputs = texts.map((text) => prefix + text.slice(0, MAX_INPUT_CHARS));
      const out: Float32Array[] = [];
      for (const batch of batches(inputs)) out.push(...(await request(batch, signal)));
      return out;
    },
  };
}

/** Inputs in groups of at most MAX_BATCH_INPUTS and about MAX_BATCH_CHARS. */
export function batches<T extends string>(inputs: readonly T[]): T[][] {
  const out: T[][] = [];
  let current: T[] = [];
  let chars = 0;
  for (const input of inputs) {
    if (
      current.length > 0 &&
      (current.length >= MAX_BATCH_INPUTS || chars + input.length > MAX_BATCH_CHARS)
    ) {
      out.push(current);
      current = [];
      chars = 0;
    }
    current.push(input);
    chars += input.length;
  }
  if (current.length > 0) out.push(current);
  return out;
}

/** The vector scaled to length 1 (cosine similarity is then a dot product); a zero vector stays zero. */
export function normalised(values: readonly number[]): Float32Array {
  let sum = 0;
  for (const value of values) sum += value * value;
  const norm = Math.sqrt(sum);
  const out = new Float32Array(values.length);
  if (norm === 0) return out;
  for (let i = 0; i < values.length; i++) out[i] = (values[i] as number) / norm;
  return out;
}

function providerMessage(text: string): string {
  try {
    const parsed = JSON.parse(text) as { error?: { message?: unknown } | string; message?: unknown };
    const message =
      typeof parsed.error === "string"
        ? parsed.error
        : typeof parsed.error?.message === "string"
          ? parsed.error.message
          : typeof parsed.message === "string"
            ? parsed.message
            : "";
    return message.slice(0, 300);
  } catch {
    return text.trim().slice(0, 200);
  }
}

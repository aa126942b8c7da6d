import type { z } from "zod";
import { ServiceError, errorBodyText, errorMessage } from "./errors.js";
import type { Logger } from "./logger.js";
import { silentLogger } from "./logger.js";
import { formatZodError } from "./zod-format.js";

export interface ServiceClientOptions {
  /** e.g. "http://127.0.0.1:3003" */
  baseUrl: string;
  /** Sent as `Authorization: Bearer <secret>`. */
  bearer?: string;
  /** Per-attempt timeout. */
  timeoutMs?: number;
  /**
   * Extra attempts after the first, for network errors, 429 and 5xx, for idempotent methods (GET,
   * HEAD, PUT, DELETE, OPTIONS). Other methods are sent once unless a call sets `retries` itself.
   */
  retries?: number;
  /** First backoff delay; doubles each retry. */
  backoffMs?: number;
  logger?: Logger;
  sleep?: (ms: number) => Promise<void>;
}

export interface RequestOptions<T extends z.ZodType> {
  body?: unknown;
  /** Validates a 2xx response body; the typed result is returned. */
  schema?: T;
  timeoutMs?: number;
  /** Opt in (or out) of retries for this call, whatever its method. */
  retries?: number;
  signal?: AbortSignal;
  /** Extra request headers (e.g. `Prefer`). */
  headers?: Record<string, string>;
}

const IDEMPOTENT = new Set(["GET", "HEAD", "PUT", "DELETE", "OPTIONS"]);

export interface ServiceResponse<T> {
  status: number;
  data: T;
}

export interface ServiceClient {
  readonly baseUrl: string;
  request<T extends z.ZodType = z.ZodUnknown>(
    method: string,
    path: string,
    options?: RequestOptions<T>,
  ): Promise<ServiceResponse<z.infer<T>>>;
  /**
   * A GET whose answer is read as a stream (an archive), once: a non-2xx answer or an unreachable
   * service is a ServiceError as for `request`. `timeoutMs` bounds the wait for the answer to begin.
   */
  download(
    path: string,
    options?: { timeoutMs?: number; signal?: AbortSignal },
  ): Promise<ReadableStream<Uint8Array>>;
}

const defaultSleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * The one way services call each other. A non-2xx answer becomes a ServiceError carrying the
 * status and the parsed body (so callers can relay a sibling's 400 message); for idempotent
 * requests, network failures, timeouts, 429 and 5xx are retried with exponential backoff.
 */
export function createServiceClient(options: ServiceClientOptions): ServiceClient {
  const logger = options.logger ?? silentLogger;
  const sleep = options.sleep ?? defaultSleep;
  const baseUrl = options.baseUrl.replace(/\/+$/, "");

  const auth = (): Record<string, string> =>
    options.bearer ? { Authorization: `Bearer ${options.bearer}` } : {};
  const unreachable = (method: string, path: string, error: unknown) =>
    new ServiceError(`${method} ${baseUrl}${path} unreachable: ${errorMessage(error)}`);

  async function attempt(method: string, path: string, opts: RequestOptions<z.ZodType>) {
    const headers: Record<string, string> = { Accept: "application/json", ...opts.headers, ...auth() };
    if (opts.body !== undefined) headers["Content-Type"] = "application/json";
    const timeout = AbortSignal.timeout(opts.timeoutMs ?? options.timeoutMs ?? 30_000);
    const signal = opts.signal ? AbortSignal.any([opts.signal, timeout]) : timeout;
    const response = await fetch(baseUrl + path, {
      method,
      headers,
      body: opts.body === undefined ? undefined : JSON.stringify(opts.body),
      signal,
    });
    return { status: response.status, data: parseBody(await response.text()) };
  }

  return {
    baseUrl,
    async download(path, opts = {}) {
      const started = new AbortController();
      const timer = setTimeout(() => started.abort(new Error("no answer in time")), opts.timeoutMs ?? 30_000);
      const signal = opts.signal ? AbortSignal.any([opts.signal, started.signal]) : started.signal;
      let response: Response;
      try {
        response = await fetch(baseUrl + path, { headers: auth(), signal });
      } catch (error) {
        throw unreachable("GET", path, error);
      } finally {
        clearTimeout(timer);
      }
      if (!response.ok || !response.body) {
        const data = parseBody(await response.text().catch(() => ""));
        throw failed("GET", path, response.status, data);
      }
      return response.body;
    },
    async request(method, path, opts = {}) {
      // A POST that failed may still have had its effect: it is repeated only when the call says so.
      const retries = opts.retries ?? (IDEMPOTENT.has(method.toUpperCase()) ? (options.retries ?? 2) : 0);
      let delay = options.backoffMs ?? 500;
      for (let tryNumber = 0; ; tryNumber++) {
        let outcome: { status: number; data: unknown } | Error;
        try {
          outcome = await attempt(method, path, opts);
        } catch (error) {
          if (opts.signal?.aborted) throw error;
          outcome = error instanceof Error ? error : new Error(String(error));
        }
        let failure: ServiceError;
        if (outcome instanceof Error) {
          failure = unreachable(method, path, outcome);
        } else {
          const { status, data } = outcome;
          if (status >= 200 && status < 300) return validate(method, path, status, data, opts.schema);
          failure = failed(method, path, status, data);
          if (status !== 429 && status < 500) throw failure;
        }
        if (tryNumber >= retries) throw failure;
        logger.warn("service call failed, retrying", {
          path,
          attempt: tryNumber + 1,
          error: failure.message,
        });
        await sleep(delay);
        delay *= 2;
      }
    },
  };
}

function validate<T>(
  method: string,
  path: string,
  status: number,
  data: unknown,
  schema?: z.ZodType,
): ServiceResponse<T> {
  if (!schema) return { status, data: data as T };
  const parsed = schema.safeParse(data);
  if (!parsed.success) {
    throw new ServiceError(
      `${method} ${path}: unexpected response: ${formatZodError(parsed.error)}`,
      status,
      data,
    );
  }
  return { status, data: parsed.data as T };
}

/** A response's body: its JSON when it is JSON, else its text. */
function parseBody(text: string): unknown {
  if (text.length === 0) return text;
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return text;
  }
}

/** A non-2xx answer as an error carrying its status and body. */
function failed(method: string, path: string, status: number, data: unknown): ServiceError {
  const message = describeErrorBody(data) ?? `HTTP ${status}`;
  return new ServiceError(`${method} ${path} failed (${status}): ${message}`, status, data);
}

function describeErrorBody(data: unknown): string | undefined {
  const text = errorBodyText(data);
  if (text !== undefined) return text;
  if (typeof data === "string" && data.length > 0) return data.slice(0, 500);
  return undefined;
}

import { DomainError } from "@stavrobot/common";

/**
 * Reading signal-cli's per-recipient send results: `{recipientAddress, type, token?,
 * retryAfterSeconds?}`, in the result of a `send` and, when the send failed, in the JSON-RPC
 * error's `data.response.results`. A rate limit is code -5 (the CLI's exit code 5) with a result
 * of type `RATE_LIMIT_FAILURE` carrying the challenge token (signal-cli issue #1558).
 */

interface SendResult {
  type?: unknown;
  token?: unknown;
  retryAfterSeconds?: unknown;
}

export interface RateLimit {
  retryAfterSeconds: number;
  token: string | undefined;
}

/** Used when Signal names no wait: short, since the app tells the person when to try again. */
const DEFAULT_RETRY_AFTER_SECONDS = 60;

const RATE_LIMIT_CODE = -5;

function resultsOf(value: unknown): SendResult[] {
  const results = (value as { results?: unknown } | null | undefined)?.results;
  return Array.isArray(results) ? results.filter((r): r is SendResult => !!r && typeof r === "object") : [];
}

/** The rate limit a failed call reports (error `data` and `code`), if it is one. */
export function rateLimitOf(data: unknown, code?: number): RateLimit | undefined {
  const results = resultsOf((data as { response?: unknown } | null | undefined)?.response);
  return rateLimitIn(results, code === RATE_LIMIT_CODE);
}

function rateLimitIn(results: SendResult[], force: boolean): RateLimit | undefined {
  const limited = results.filter((result) => result.type === "RATE_LIMIT_FAILURE");
  if (limited.length === 0 && !force) return undefined;
  const token = limited
    .map((result) => result.token)
    .find((t): t is string => typeof t === "string" && t !== "");
  const waits = limited
    .map((result) => result.retryAfterSeconds)
    .filter((s): s is number => typeof s === "number" && Number.isInteger(s) && s >= 0);
  return { retryAfterSeconds: waits.length > 0 ? Math.max(...waits) : DEFAULT_RETRY_AFTER_SECONDS, token };
}

/**
 * A `send` signal-cli answered without an error object can still have failed for its recipient:
 * a rate limit, or no result of type `SUCCESS` at all (e.g. `UNREGISTERED_FAILURE`).
 */
export function sendFailureOf(
  result: unknown,
): ({ kind: "rate-limit" } & RateLimit) | { kind: "error"; error: DomainError } | undefined {
  const results = resultsOf(result);
  const limit = rateLimitIn(results, false);
  if (limit) return { kind: "rate-limit", ...limit };
  if (results.length === 0 || results.some((r) => r.type === "SUCCESS")) return undefined;
  const types = [...new Set(results.map((r) => String(r.type)))].join(", ");
  return {
    kind: "error",
    error: new DomainError("upstream", `signal-cli could not deliver the message: ${types}`),
  };
}

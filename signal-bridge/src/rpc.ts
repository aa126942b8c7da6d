import { randomUUID } from "node:crypto";
import { errorMessage } from "@stavrobot/common";

/**
 * A JSON-RPC client for signal-cli's HTTP daemon (`POST /api/v1/rpc`, man signal-cli-jsonrpc(5)).
 * Two kinds of failure, because callers answer them differently: signal-cli answered with an
 * error object (`RpcError`, its code and data kept: a rate limit is code -5 with the challenge in
 * `data.response.results`), or nobody answered at all (`RpcUnreachableError`).
 */

/** signal-cli answered with a JSON-RPC error object. */
export class RpcError extends Error {
  constructor(
    readonly code: number,
    message: string,
    readonly data: unknown,
  ) {
    super(message);
    this.name = "RpcError";
  }
}

/** signal-cli could not be reached, timed out or answered something that is not JSON-RPC. */
export class RpcUnreachableError extends Error {
  constructor(
    message: string,
    /** True when the connection was refused: the daemon is not listening (down or restarting). */
    readonly refused: boolean,
  ) {
    super(message);
    this.name = "RpcUnreachableError";
  }
}

export interface RpcClient {
  call(method: string, params: Record<string, unknown>, options?: { timeoutMs?: number }): Promise<unknown>;
}

/** `baseUrl` is the daemon's `http://127.0.0.1:<port>`. */
export function createRpcClient(baseUrl: string, defaultTimeoutMs = 120_000): RpcClient {
  return {
    async call(method, params, options = {}) {
      const id = randomUUID();
      const timeoutMs = options.timeoutMs ?? defaultTimeoutMs;
      let response: Response;
      try {
        response = await fetch(`${baseUrl}/api/v1/rpc`, {
          method: "POST",
          headers: { "Content-Type": "application/json", Accept: "application/json" },
          body: JSON.stringify({ jsonrpc: "2.0", method, params, id }),
          signal: AbortSignal.timeout(timeoutMs),
        });
      } catch (error) {
        const refused = causeCode(error) === "ECONNREFUSED";
        const reason = isTimeout(error) ? `no answer within ${timeoutMs / 1000} s` : errorMessage(error);
        throw new RpcUnreachableError(`signal-cli ${method}: ${reason}`, refused);
      }
      const text = await response.text().catch(() => "");
      const answer = parseAnswer(text);
      if (!answer || (response.status !== 200 && !answer.error)) {
        throw new RpcUnreachableError(
          `signal-cli ${method}: unexpected answer (HTTP ${response.status}) ${text.slice(0, 200)}`,
          false,
        );
      }
      if (answer.error) {
        const { code, message, data } = answer.error;
        throw new RpcError(typeof code === "number" ? code : 0, String(message ?? "unknown error"), data);
      }
      return answer.result;
    },
  };
}

interface RpcAnswer {
  result?: unknown;
  error?: { code?: unknown; message?: unknown; data?: unknown };
}

function parseAnswer(text: string): RpcAnswer | undefined {
  try {
    const value: unknown = JSON.parse(text);
    if (!value || typeof value !== "object" || Array.isArray(value)) return undefined;
    const answer = value as RpcAnswer;
    if (answer.error !== undefined && (typeof answer.error !== "object" || answer.error === null))
      return undefined;
    return "result" in answer || answer.error ? answer : undefined;
  } catch {
    return undefined;
  }
}

function causeCode(error: unknown): string | undefined {
  const cause = (error as { cause?: { code?: unknown } } | undefined)?.cause;
  return typeof cause?.code === "string" ? cause.code : undefined;
}

function isTimeout(error: unknown): boolean {
  return error instanceof Error && (error.name === "TimeoutError" || error.name === "AbortError");
}

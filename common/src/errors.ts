/**
 * The one error type that carries an HTTP status. Route handlers and domain code throw it; the
 * HTTP layer turns it into `{"error": message}` in exactly one place (see http/respond.ts).
 */
export class HttpError extends Error {
  readonly status: number;
  /** Extra fields merged into the JSON error body (never internal details). */
  readonly details: Record<string, unknown> | undefined;
  readonly headers: Record<string, string> | undefined;

  constructor(
    status: number,
    message: string,
    details?: Record<string, unknown>,
    headers?: Record<string, string>,
  ) {
    super(message);
    this.name = "HttpError";
    this.status = status;
    this.details = details;
    this.headers = headers;
  }
}

export const badRequest = (message: string, details?: Record<string, unknown>): HttpError =>
  new HttpError(400, message, details);
export const notFound = (message = "Not found"): HttpError => new HttpError(404, message);
export const conflict = (message: string): HttpError => new HttpError(409, message);

/** Raised when a service's configuration file is missing or wrong. The message names the key. */
export class ConfigError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "ConfigError";
  }
}

/** A call to a sibling service failed: unreachable, timed out, or answered with an error status. */
export class ServiceError extends Error {
  readonly status: number | undefined;
  readonly body: unknown;

  constructor(message: string, status?: number, body?: unknown) {
    super(message);
    this.name = "ServiceError";
    this.status = status;
    this.body = body;
  }
}

export function errorMessage(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/**
 * What went wrong, in the domain's own words. Domain code (plugin lifecycle, a python run, the
 * coder's queue, a Signal send) throws these and names no HTTP status; the HTTP layer maps each
 * kind to one status in exactly one place (`DOMAIN_ERROR_STATUS` in http/serve.ts).
 */
export type DomainErrorKind =
  /** The request asks for something that cannot be: a bad value, a refused URL, a plugin that may not change. */
  | "invalid"
  /** The owner does not allow it (a disabled plugin, a tool not permitted). */
  | "forbidden"
  | "not-found"
  /** It already exists, or was already done. */
  | "conflict"
  /** Over a size limit. */
  | "too-large"
  /** Understood and allowed, but the thing it ran failed (a plugin's init script): not this service's fault. */
  | "failed"
  /** The outside service refuses for now; `details.retryAfterSeconds` says how long to wait. */
  | "rate-limited"
  /** A program or service this one relies on failed (signal-cli). */
  | "upstream"
  /** Not possible right now (stopping, a dependency not running); the same request may work later. */
  | "unavailable";

export class DomainError extends Error {
  readonly kind: DomainErrorKind;
  /** Extra facts for the caller, merged into the error body next to the message (never internal details). */
  readonly details: Record<string, unknown> | undefined;

  constructor(kind: DomainErrorKind, message: string, details?: Record<string, unknown>) {
    super(message);
    this.name = "DomainError";
    this.kind = kind;
    this.details = details;
  }
}

/**
 * An error that is purely HTTP's: bad JSON, a missing content type, authentication, an unknown
 * route. Route handlers throw it; domain code throws a DomainError instead. The request listener
 * (http/serve.ts) turns both into `{"error": message, ...details}`.
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

/** Raised when a service's configuration file is missing or wrong. The message names the key. */
export class ConfigError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "ConfigError";
  }
}

/**
 * A start that cannot go on for a reason of this machine, not of the program: a port another
 * process holds, a data directory another instance runs on, a directory it may not write. The
 * message is one line saying what and how to fix it; the process prints it and exits with
 * `exitCode` (`EXIT_IN_USE`, `EXIT_CANNOT_WRITE`) instead of a stack trace.
 */
export class StartRefused extends Error {
  readonly exitCode: number;

  constructor(message: string, exitCode: number) {
    super(message);
    this.name = "StartRefused";
    this.exitCode = exitCode;
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

/** The `error` text of a JSON error body (`{"error": "…"}`, as every service answers), if it has one. */
export function errorBodyText(body: unknown): string | undefined {
  if (body && typeof body === "object" && "error" in body && typeof body.error === "string")
    return body.error;
  return undefined;
}

export function errorMessage(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

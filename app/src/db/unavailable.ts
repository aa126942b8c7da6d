/**
 * The database cannot be reached or used right now: no session could be opened (refused, not
 * accepting connections, shutting down, a pool that waited in vain), or the session a statement ran
 * on was lost (ended by the server, dropped); for the embedded database, it is closed. What the
 * server said does not matter, only that it happened. Callers keep what they hold and try again when it is back, instead of failing the
 * message they work on.
 */
export class DatabaseUnavailableError extends Error {
  constructor(cause: unknown) {
    super(`The database is unavailable: ${cause instanceof Error ? cause.message : String(cause)}`, {
      cause,
    });
    this.name = "DatabaseUnavailableError";
  }
}

export function isDatabaseUnavailable(error: unknown): error is DatabaseUnavailableError {
  return error instanceof DatabaseUnavailableError;
}

/** Resolves when `signal` aborts (never without one), holding no timer. */
export function untilAborted(signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve) => signal?.addEventListener("abort", () => resolve(), { once: true }));
}

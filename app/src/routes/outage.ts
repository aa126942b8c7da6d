import { HttpError } from "@stavrobot/common";
import { isDatabaseUnavailable } from "../db/database.js";

/** How long a client is asked to wait before sending again what the database could not take. */
export const RETRY_AFTER_SECONDS = 5;

export const DATABASE_UNAVAILABLE_REPLY =
  "The database is unavailable right now. Please try again in a moment.";

/** 503 with `Retry-After`: nothing was done, the same request may work in a moment. */
export function retryLater(message: string): HttpError {
  return new HttpError(503, message, undefined, { "Retry-After": String(RETRY_AFTER_SECONDS) });
}

/** The answer to any request that met a database outage (the listeners' `mapError`). */
export function answerDatabaseOutage(error: unknown): HttpError | undefined {
  return isDatabaseUnavailable(error) ? retryLater(DATABASE_UNAVAILABLE_REPLY) : undefined;
}

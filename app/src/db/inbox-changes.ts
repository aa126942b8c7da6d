import { sanitizeText } from "@stavrobot/common";
import type { StatementPart } from "./database.js";

/**
 * How a finished entry ended, kept in its own column so nothing has to read it back from the
 * reply's text: a reply, a turn that ended without text, `/stop`, an error, a steering message
 * its turn took in, a note for the owner that answers no message.
 */
export type InboxOutcome = "reply" | "empty" | "aborted" | "error" | "steered" | "notice";

/** An inbox change that rides in the same statement (the same commit) as the messages of a turn. */
export type InboxChange = StatementPart;

/** The entry starts its turn. */
export function processingChange(id: number, countAttempt: boolean): InboxChange {
  return {
    sql: (p) =>
      `UPDATE inbox SET status = 'processing', attempts = attempts + $${p + 1}::int WHERE id = $${p}`,
    params: [id, countAttempt ? 1 : 0],
  };
}

/** How an entry ends: its status, the reply (or error) it got and what kind of ending that was. */
export interface EntryEnd {
  status: "done" | "failed";
  response: string;
  outcome: InboxOutcome;
  error?: string | undefined;
  /** Its answer already reached its audience (a steering message, whose answer was the steer). */
  seen?: boolean;
}

/** The entry is finished, with the reply (or error) it got. */
export function finishChange(id: number, end: EntryEnd): InboxChange {
  return {
    sql: (p) =>
      `UPDATE inbox SET status = $${p + 1}, response = $${p + 2}, error = $${p + 3}, outcome = $${p + 4},
         finished_at = now(), seen = seen OR $${p + 5} WHERE id = $${p}`,
    params: [
      id,
      end.status,
      sanitizeText(end.response),
      end.error === undefined ? null : sanitizeText(end.error),
      end.outcome,
      end.seen === true,
    ],
  };
}

import type { EntryEnd } from "../db/inbox-changes.js";
import { ABORTED_REPLY, EMPTY_REPLY, STEERING_REPLY, STOPPED_STEER_REPLY } from "./replies.js";

/** How a turn ended, as its audience should hear it. */
export interface Answer {
  kind: "reply" | "error" | "aborted";
  /** The reply's text (empty when the turn ended without one) or the error's message. */
  text: string;
}

/**
 * How a message's handling ends, said once for the three who hear of it: the inbox row (its
 * status, reply and outcome), the answer's audience, and whoever waits for `reply` (the HTTP
 * caller).
 */
export interface Ending {
  end: EntryEnd;
  answer: Answer;
  reply: string;
}

/** The turn answered (an empty answer is kept as such, and reaches a channel as nothing). */
export function replied(text: string): Ending {
  return {
    end: { status: "done", response: text || EMPTY_REPLY, outcome: text ? "reply" : "empty" },
    answer: { kind: "reply", text },
    reply: text || EMPTY_REPLY,
  };
}

/** `/stop` ended it. */
export function aborted(): Ending {
  return {
    end: { status: "done", response: ABORTED_REPLY, outcome: "aborted" },
    answer: { kind: "aborted", text: ABORTED_REPLY },
    reply: ABORTED_REPLY,
  };
}

/** It failed: `text` for people, `error` for the record. */
export function failed(text: string, error?: string): Ending {
  return {
    end: { status: "failed", response: text, outcome: "error", ...(error !== undefined ? { error } : {}) },
    answer: { kind: "error", text },
    reply: text,
  };
}

/** A steering message its turn took in: its answer was the steer's acknowledgement, already given. */
export const STEERED_END: EntryEnd = {
  status: "done",
  response: STEERING_REPLY,
  outcome: "steered",
  seen: true,
};

/**
 * A steering message its turn had not taken in when `/stop` ended that turn: stopped with it,
 * unanswered (the owner was told so by the answer to `/stop`).
 */
export const STOPPED_STEER_END: EntryEnd = {
  status: "done",
  response: STOPPED_STEER_REPLY,
  outcome: "aborted",
  seen: true,
};

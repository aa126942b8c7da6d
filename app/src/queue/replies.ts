/** What the queue answers in its own words: to a steer, a `/stop`, a repeat, a turn it could not finish. */
export const STEERING_REPLY = "Message received, steering the current request.";
export const ABORTED_REPLY = "Aborted.";
/** What a steering message not taken in by a turn that `/stop` ended is kept with. */
export const STOPPED_STEER_REPLY = "Stopped with the request it was steering, before the assistant read it.";

/** `/stop`'s answer when messages had steered the turn it stopped: they are stopped with it. */
export function abortedReply(steered: number): string {
  if (steered === 0) return ABORTED_REPLY;
  const what =
    steered === 1
      ? "The message you sent while it ran was"
      : `The ${steered} messages you sent while it ran were`;
  return `${ABORTED_REPLY} ${what} stopped with it, unanswered.`;
}
export const DUPLICATE_REPLY = "This message was already received.";
export const EMPTY_REPLY = "(The assistant finished without a text reply.)";
export const INTERRUPTED_REPLY =
  "Your message was interrupted (the assistant restarted) after some of its actions had already run. " +
  "It was not retried, to avoid repeating them; please check what was done and ask again if needed.";
export const OUTAGE_REPLY =
  "Your message was interrupted by a database outage after some of its actions had already run. " +
  "It was not retried, to avoid repeating them; please check what was done and ask again if needed.";
export const CRASHED_REPLY =
  "The assistant stopped unexpectedly every time it worked on your message, so it gave up on it. " +
  "Please try again, perhaps worded differently.";

/** "400 {"type":"error","error":{"message":"x"}}" → "x (HTTP 400)". */
export function describeProviderError(message: string): string {
  const match = /^(\d{3})\s+(\{.*\})\s*$/s.exec(message.trim());
  if (match) {
    try {
      const body = JSON.parse(match[2] as string) as { error?: { message?: string }; message?: string };
      const inner = body.error?.message ?? body.message;
      if (inner) return `${inner} (HTTP ${match[1]})`;
    } catch {
      // Fall through to the raw text.
    }
  }
  return message;
}

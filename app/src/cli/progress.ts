/** A turn's progress as the app streams it: a tool starting, a retry coming, text being written. */
export type Progress =
  | { type: "tool"; name: string }
  | { type: "retry"; attempt: number; of: number; reason: string; inSeconds: number }
  | { type: "text"; delta: string }
  | { type: "progress"; plugin: string; tool: string; progress: number; total?: number; message?: string };

/**
 * A turn's progress as the client prints it, one line each: a tool starting, how far a tool got,
 * a retry of a failing provider with its reason (`error`: for stderr). Text as it is written is
 * not printed: the answer comes whole.
 */
export function progressLine(event: Progress): { text: string; error: boolean } | undefined {
  if (event.type === "tool") return { text: `· ${event.name}\n`, error: false };
  if (event.type === "progress") {
    const howFar = event.total ? `${event.progress} of ${event.total}` : String(event.progress);
    const said = event.message ? `${event.message} ` : "";
    return { text: `· ${event.plugin}/${event.tool}: ${said}(${howFar})\n`, error: false };
  }
  if (event.type === "retry") {
    // The reason is the provider's own sentence ("Connection error."), or a phrase without a stop.
    const reason = event.reason.trim().replace(/[.:;,]+$/, "");
    const wait = event.inSeconds > 0 ? `in ${event.inSeconds} s` : "now";
    return {
      text: `· ${reason}. Trying again ${wait} (retry ${event.attempt} of ${event.of}).\n`,
      error: true,
    };
  }
  return undefined;
}

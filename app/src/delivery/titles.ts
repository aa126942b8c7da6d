import type { InboxPayload } from "../db/inbox.js";

const TITLE_CHARS = 200;

/**
 * How the owner's notification names an answer nobody waited for: the title its message was
 * saved with (a reminder's note, a plugin's tool), who wrote it for a subagent's message, else the
 * first line of the message (never the model's instructions below it).
 */
export function notificationTitle(entry: {
  source: string | null;
  payload?: InboxPayload | undefined;
}): string {
  const payload = entry.payload;
  if (payload?.title?.trim()) return payload.title.trim().slice(0, TITLE_CHARS);
  if (entry.source === "agent" && payload?.from) return `From ${payload.from}`.slice(0, TITLE_CHARS);
  const first = (payload?.message ?? "").split("\n")[0]?.trim() ?? "";
  return first.slice(0, TITLE_CHARS);
}

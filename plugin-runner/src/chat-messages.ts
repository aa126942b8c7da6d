import { CHAT_BODY_LIMIT_BYTES, CHAT_FILE_LIMIT_BYTES, CHAT_MAX_FILES, fence } from "@stavrobot/common";
import type { ChatRequest, TransportedFile } from "@stavrobot/common";

export { fence };

/** What running a tool or init script produced, before it becomes an HTTP answer or a chat message. */
export type RunOutcome =
  | { success: true; output: unknown; files?: TransportedFile[]; warnings?: string[] }
  | { success: false; error: string };

/**
 * What the app's `POST /chat` accepts: a limited number of inline files, each at most
 * CHAT_FILE_LIMIT_BYTES once decoded, in a body of at most CHAT_BODY_LIMIT_BYTES. Files beyond
 * that are left out with a note.
 */
const MAX_CHAT_FILE_CHARS = Math.ceil(CHAT_FILE_LIMIT_BYTES / 3) * 4;
/**
 * Room in the body for the message beside the files: the tool's output (stdout is capped at 1 MB
 * by default, but pretty-printed JSON and JSON escaping can grow it) and the JSON around it all.
 */
const MESSAGE_ROOM_BYTES = 5 * 1024 * 1024;
const MAX_CHAT_FILES_CHARS = CHAT_BODY_LIMIT_BYTES - MESSAGE_ROOM_BYTES;

/**
 * The chat message carrying an async tool's result back to the app: the outcome as a synchronous
 * run answers it (`pluginResult`), which the app turns into the model's text as it does that one.
 * Files that would not fit in a message are left out with a warning. `turn`: the app's turn that
 * started the run, so the result goes back to that turn's agent (absent: the main agent's).
 */
export function toolResultMessage(
  plugin: string,
  tool: string,
  outcome: RunOutcome,
  turn?: number,
): ChatRequest {
  return {
    source: `plugin:${plugin}/${tool}`,
    pluginResult: { plugin, tool, outcome: carried(outcome) },
    ...(turn !== undefined ? { turn } : {}),
  };
}

/** The chat message reporting how an async init script ended. */
export function initResultMessage(plugin: string, outcome: RunOutcome): ChatRequest {
  return { source: `plugin:${plugin}/init`, pluginResult: { plugin, outcome: carried(outcome) } };
}

/** The outcome as a message can carry it: its files within the message's limits. */
function carried(outcome: RunOutcome): NonNullable<ChatRequest["pluginResult"]>["outcome"] {
  if (!outcome.success) return outcome;
  const { files, note } = chatFiles(outcome.files);
  const warnings = [...(outcome.warnings ?? []), ...(note ? [note] : [])];
  return {
    success: true,
    output: outcome.output,
    ...(files.length > 0 ? { files } : {}),
    ...(warnings.length > 0 ? { warnings } : {}),
  };
}

function chatFiles(files: TransportedFile[] = []) {
  const kept: TransportedFile[] = [];
  const left: string[] = [];
  let total = 0;
  for (const file of files) {
    const fits =
      kept.length < CHAT_MAX_FILES &&
      file.data.length <= MAX_CHAT_FILE_CHARS &&
      total + file.data.length <= MAX_CHAT_FILES_CHARS;
    if (!fits) {
      left.push(file.filename);
      continue;
    }
    total += file.data.length;
    kept.push({ filename: file.filename, data: file.data });
  }
  const note =
    left.length > 0 ? `(Output files too large to deliver were left out: ${left.join(", ")}.)` : undefined;
  return { files: kept, note };
}

/**
 * The REPL's own commands, answered here and never sent to the assistant (the app knows only
 * `/stop`, which is sent). Each is a whole line, trimmed, in any case.
 */

export const HELP_TEXT = `Type a message and press Enter; the reply is printed when it comes.
While a reply is pending:
  /stop (or Ctrl-C)   stop it (and anything you sent to steer it)
  any other line      steers it: the assistant reads it before going on
Answered here, never sent to the assistant:
  /help               this list
  /new                what a new conversation means here
Ctrl-D (or Ctrl-C at the prompt) ends the session; the conversation goes on next time.
`;

/**
 * The assistant keeps one conversation with its owner, whichever console or channel they write
 * from: there is no other to switch to, and nothing is forgotten by asking.
 */
export const NEW_TEXT = `There is one conversation with the assistant, the same on every console and channel: it
keeps what matters in its memory and summarises older messages by itself, so there is no new one
to start and nothing to clear. Just say what comes next; to drop a request in progress, /stop.
`;

/** The text a local command prints, or undefined for a line that goes to the assistant. */
export function localCommand(line: string): string | undefined {
  const command = line.trim().toLowerCase();
  if (command === "/help" || command === "/?") return HELP_TEXT;
  if (command === "/new") return NEW_TEXT;
  return undefined;
}

/** `/stop`, as the app recognises it. */
export function isStop(line: string): boolean {
  return line.trim().toLowerCase() === "/stop";
}

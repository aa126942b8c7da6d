import { createInterface } from "node:readline";
import { isStop, localCommand } from "./commands.js";
import type { Following } from "./live.js";
import { progressLine, type Progress } from "./progress.js";
import { Screen } from "./screen.js";
import { EXIT, printReply, sendMessage, type Output } from "./send.js";
import type { ServerUrl } from "./server-url.js";

export interface ReplIo extends Output {
  stdin: NodeJS.ReadableStream & { isTTY?: boolean };
}

/** The REPL's part in following the answers kept for the owner. */
export interface LiveSession {
  live: Following;
  /** From the first prompt on, answers are printed through the screen. */
  follow: (print: (text: string) => void) => void;
}

/** The app's answer to `/stop`, and the reply of the turn it stopped (app/src/queue/replies.ts). */
const ABORTED = "Aborted.";

/**
 * Interactive mode. Lines are answered one after another, in order (so piped input works). On a
 * terminal, a line typed while a reply is pending is sent at once instead: the server treats it
 * as steering the running request, and `/stop` aborts it (with what steered it). `/help` and
 * `/new` are answered here (commands.ts). What the turn does is shown as it happens (each tool,
 * each retry with its reason). Answers kept for the owner (a reminder, a plugin's result) are
 * printed as they arrive, above the line being typed, and marked seen.
 */
export function repl(io: ReplIo, server: ServerUrl, password: string, session: LiveSession): Promise<number> {
  const interactive = Boolean(io.stdin.isTTY);
  const rl = createInterface({ input: io.stdin, output: io.stdout, terminal: interactive });
  const screen = new Screen(rl, io.stdout, interactive);
  const print = (text: string, stream: NodeJS.WritableStream = io.stdout) => screen.print(text, stream);
  const pending: string[] = [];
  let busy = false;
  /** `/stop` was sent for the reply awaited: the answer to it said "Aborted." already. */
  let stopSent = false;
  let closed = false;
  let finished = false;
  io.stdout.write(
    `Connected to ${server.url}. Type a message (/help lists the commands); while a reply is pending, ` +
      `/stop (or Ctrl-C) aborts it and anything else steers it. Ctrl-D exits.\n`,
  );
  session.follow((text) => screen.notice(text));
  return new Promise((resolve) => {
    const finish = (code: number) => {
      if (finished) return;
      finished = true;
      session.live.close();
      rl.close();
      resolve(code);
    };
    const prompt = () => {
      if (!closed) screen.prompt();
    };
    const stop = () => {
      stopSent = true;
      void printReply(io, () => sendMessage(server, password, "/stop"), print);
    };
    // What the turn does while it runs: each tool by name, each retry at once with its reason.
    const progress = (event: Progress) => {
      const line = progressLine(event);
      if (line) print(line.text, line.error ? io.stderr : io.stdout);
    };
    const next = async (): Promise<void> => {
      if (busy) return;
      const line = pending.shift();
      if (line === undefined) {
        if (closed) finish(EXIT.ok);
        else prompt();
        return;
      }
      // An empty line (a stray Enter) sends nothing and ends nothing.
      if (!line.trim()) return next();
      screen.taken();
      const local = localCommand(line);
      if (local !== undefined) {
        print(local);
        return next();
      }
      busy = true;
      stopSent = false;
      await printReply(
        io,
        async () => {
          const reply = await sendMessage(server, password, line, progress);
          // Stopped from here: the answer to `/stop` said so, once is enough.
          return stopSent && reply === ABORTED ? undefined : reply;
        },
        print,
      );
      busy = false;
      await next();
    };
    rl.on("line", (line) => {
      if (interactive && busy && line.trim()) {
        const local = localCommand(line);
        if (local !== undefined) print(local);
        else if (isStop(line)) stop();
        else void printReply(io, () => sendMessage(server, password, line), print);
        return;
      }
      pending.push(line);
      void next();
    });
    // Ctrl-C (a terminal's): stops the turn a reply is pending for, as /stop does; at the prompt,
    // ends the session.
    rl.on("SIGINT", () => {
      if (busy) stop();
      else finish(EXIT.ok);
    });
    rl.on("close", () => {
      closed = true;
      if (!busy && pending.length === 0) finish(EXIT.ok);
    });
    prompt();
  });
}

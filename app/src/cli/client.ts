/**
 * `npm run chat`: talk to the assistant from a terminal over `POST /chat`.
 *   STAVROBOT_URL       default http://localhost:3000
 *   STAVROBOT_PASSWORD  the password from config.toml (required)
 *   -m "text"           send one message, print the reply, exit
 * Exit codes: 0 ok, 1 the server answered with an error or the turn failed, 2 usage or missing settings,
 * 3 the server could not be reached.
 */
import { createInterface } from "node:readline";
import { basicAuthHeader, isMainModule } from "@stavrobot/common";
import { followAnswers, type Following, type KeptAnswer } from "./live.js";
import { readEvents } from "./sse.js";
import { Screen } from "./screen.js";

export const EXIT = { ok: 0, serverError: 1, usage: 2, unreachable: 3 } as const;

export class ClientError extends Error {
  constructor(
    message: string,
    readonly exitCode: number,
  ) {
    super(message);
  }
}

/** A turn's progress as the app streams it: a tool starting, a retry coming, text being written. */
export type Progress =
  | { type: "tool"; name: string }
  | { type: "retry"; attempt: number; of: number; reason: string; inSeconds: number }
  | { type: "text"; delta: string }
  | { type: "progress"; plugin: string; tool: string; progress: number; total?: number; message?: string };

export async function sendMessage(
  baseUrl: string,
  password: string,
  message: string,
  signal?: AbortSignal,
  onProgress?: (progress: Progress) => void,
): Promise<string> {
  let response: Response;
  try {
    response = await fetch(`${baseUrl.replace(/\/+$/, "")}/chat`, {
      method: "POST",
      headers: {
        "Content-Type": "application/json",
        Authorization: basicAuthHeader(password),
        // The turn's progress as it happens, when the app can stream it (plain JSON otherwise).
        ...(onProgress ? { Accept: "text/event-stream, application/json" } : {}),
      },
      body: JSON.stringify({ message, source: "cli" }),
      signal,
    });
  } catch (error) {
    const cause = (error as { cause?: { code?: string } }).cause?.code ?? (error as Error).message;
    throw new ClientError(
      `Cannot reach ${baseUrl} (${cause}). If the assistant restarted mid-reply, your message was saved ` +
        `and its reply will be shown with your next message.`,
      EXIT.unreachable,
    );
  }
  if (onProgress && response.ok && response.headers.get("content-type")?.startsWith("text/event-stream")) {
    return answerOf(await readTurnEvents(response, onProgress));
  }
  const text = await response.text();
  let body: { response?: unknown; error?: unknown; failed?: unknown } = {};
  try {
    body = JSON.parse(text) as typeof body;
  } catch {
    // Not JSON: reported below.
  }
  if (response.status === 401)
    throw new ClientError("Wrong password (check STAVROBOT_PASSWORD).", EXIT.serverError);
  if (!response.ok) {
    const detail = typeof body.error === "string" ? body.error : text.slice(0, 300);
    throw new ClientError(`The server answered ${response.status}: ${detail}`, EXIT.serverError);
  }
  return answerOf(body);
}

/** The reply in a `/chat` answer; a failed turn is an error whose text says why. */
function answerOf(body: { response?: unknown; error?: unknown; failed?: unknown }): string {
  // An answer that could not come (the database went away; the message runs later): why, as is.
  if (typeof body.error === "string") throw new ClientError(body.error, EXIT.serverError);
  if (typeof body.response !== "string")
    throw new ClientError("The server sent an unexpected answer.", EXIT.serverError);
  // The turn failed (the provider, a tool round cap, …): its text says why.
  if (body.failed === true) throw new ClientError(body.response, EXIT.serverError);
  return body.response;
}

/** Reads `/chat`'s events, passing progress on, up to its last event: the answer or an error. */
async function readTurnEvents(
  response: Response,
  onProgress: (progress: Progress) => void,
): Promise<{ response?: unknown; error?: unknown; failed?: unknown }> {
  for await (const { type, data } of response.body ? readEvents(response.body) : []) {
    const parsed = JSON.parse(data) as Record<string, unknown>;
    if (type === "answer" || type === "error") return parsed;
    if (["tool", "retry", "text", "progress"].includes(type)) onProgress({ type, ...parsed } as Progress);
  }
  throw new ClientError(
    "The connection ended before the answer. Your message was saved; its reply will be shown with your next message.",
    EXIT.unreachable,
  );
}

/**
 * What the client reads and writes: the process's own in `npm run chat`, in-memory streams in
 * tests.
 */
export interface ClientIo {
  argv: readonly string[];
  env: NodeJS.ProcessEnv;
  stdin: NodeJS.ReadableStream & { isTTY?: boolean };
  stdout: NodeJS.WritableStream;
  stderr: NodeJS.WritableStream;
}

type Output = Pick<ClientIo, "stdout" | "stderr">;

/** Runs the client to its end and returns the exit code. */
export async function runClient(io: ClientIo): Promise<number> {
  const { argv, env, stdout, stderr } = io;
  const baseUrl = env.STAVROBOT_URL || "http://localhost:3000";
  const password = env.STAVROBOT_PASSWORD;
  const flag = argv.indexOf("-m");
  if (argv.includes("-h") || argv.includes("--help")) {
    stdout.write('Usage: npm run chat [-- -m "message"]\nSet STAVROBOT_PASSWORD (and STAVROBOT_URL).\n');
    return EXIT.ok;
  }
  if (!password) {
    stderr.write("Set STAVROBOT_PASSWORD to the password in your config.toml.\n");
    return EXIT.usage;
  }
  if (flag !== -1) {
    const message = argv[flag + 1];
    if (!message?.trim()) {
      stderr.write('-m needs a message, e.g. -m "hello"\n');
      return EXIT.usage;
    }
    return printReply(io, () => sendMessage(baseUrl, password, message));
  }
  // Answers kept for the owner arrive while the session is open; until the REPL draws its first
  // prompt they are simply written.
  let show = (answer: KeptAnswer): void => void stdout.write(`Just in:\n${formatAnswers([answer])}\n\n`);
  const live = followAnswers({
    baseUrl,
    password,
    onAnswer: (answer) => {
      show(answer);
      void markSeen(baseUrl, password, [answer.id]);
    },
  });
  await showKeptAnswers(live, baseUrl, password, stdout);
  return repl(io, baseUrl, password, {
    live,
    follow: (print) => (show = (answer) => print(`Just in:\n${formatAnswers([answer])}\n\n`)),
  });
}

/** What arrived while no console was open, from the event stream's first catch-up (or, for an older app, `/pending`). */
async function showKeptAnswers(
  live: Following,
  baseUrl: string,
  password: string,
  stdout: NodeJS.WritableStream,
): Promise<void> {
  const wait = setTimeout(() => live.giveUp(), 10_000);
  const answers = await live.caughtUp;
  clearTimeout(wait);
  if (answers === undefined) return showPendingAnswers(baseUrl, password, stdout);
  if (answers.length === 0) return;
  stdout.write(`While you were away:\n\n${formatAnswers(answers)}\n\n`);
  await markSeen(
    baseUrl,
    password,
    answers.map((answer) => answer.id),
  );
}

/** Each answer under its title (else the first line of what it answers), and where that came from. */
function formatAnswers(answers: KeptAnswer[]): string {
  return answers
    .map((answer) => {
      const about = answer.title || answer.message.split("\n")[0]?.slice(0, 200) || "(attachment)";
      // A firing's `cron:<id>` shows as `cron`. (The client imports nothing outside its folder, so
      // this is not audience.ts's shownSource.)
      const shown = answer.source?.startsWith("cron:") ? "cron" : answer.source;
      const from = shown && shown !== "cli" && shown !== "web" ? ` (${shown})` : "";
      return `> ${about}${from}\n${answer.response}`;
    })
    .join("\n\n");
}

/** Tells the app these answers were shown, so no console and no reply shows them again. */
async function markSeen(baseUrl: string, password: string, ids: number[]): Promise<void> {
  try {
    await fetch(`${baseUrl.replace(/\/+$/, "")}/api/answers/seen`, {
      method: "POST",
      headers: { Authorization: basicAuthHeader(password), "Content-Type": "application/json" },
      body: JSON.stringify({ ids }),
      signal: AbortSignal.timeout(10_000),
    });
  } catch {
    // Not marked: shown once more later, which beats not at all.
  }
}

/**
 * Answers kept for the owner while no terminal was open (a plugin's result, a cron entry, with no
 * Telegram or Signal to send them to): printed when a session starts, then marked seen. A server
 * that cannot say (unreachable, older) is not an error here: the first reply will say so.
 */
export async function showPendingAnswers(
  baseUrl: string,
  password: string,
  stdout: NodeJS.WritableStream,
): Promise<void> {
  const base = baseUrl.replace(/\/+$/, "");
  try {
    const response = await fetch(`${base}/api/answers/pending`, {
      headers: { Authorization: basicAuthHeader(password) },
      signal: AbortSignal.timeout(10_000),
    });
    if (!response.ok) return;
    const body = (await response.json()) as { answers?: KeptAnswer[] };
    const answers = body.answers ?? [];
    if (answers.length === 0) return;
    stdout.write(`While you were away:\n\n${formatAnswers(answers)}\n\n`);
    await markSeen(
      baseUrl,
      password,
      answers.map((answer) => answer.id),
    );
  } catch {
    // Unreachable or not JSON: nothing to show.
  }
}

/** The REPL's part in following the answers kept for the owner. */
interface LiveSession {
  live: Following;
  /** From the first prompt on, answers are printed through the screen. */
  follow: (print: (text: string) => void) => void;
}

/**
 * Interactive mode. Lines are answered one after another, in order (so piped input works). On a
 * terminal, a line typed while a reply is pending is sent at once instead: the server treats it
 * as steering the running request, and `/stop` aborts it. Answers kept for the owner (a reminder,
 * a plugin's result) are printed as they arrive, above the line being typed, and marked seen.
 */
function repl(io: ClientIo, baseUrl: string, password: string, session: LiveSession): Promise<number> {
  const interactive = Boolean(io.stdin.isTTY);
  const rl = createInterface({ input: io.stdin, output: io.stdout, terminal: interactive });
  const screen = new Screen(rl, io.stdout, interactive);
  const print = (text: string, stream: NodeJS.WritableStream = io.stdout) => screen.print(text, stream);
  const pending: string[] = [];
  let busy = false;
  let closed = false;
  let finished = false;
  io.stdout.write(
    `Connected to ${baseUrl}. Type a message; while a reply is pending, /stop (or Ctrl-C) aborts it ` +
      `and anything else steers it. Ctrl-D exits.\n`,
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
      busy = true;
      screen.taken();
      // What the turn does while it runs: each tool by name, each retry at once with its reason.
      const progress = (event: Progress) => {
        if (event.type === "tool") print(`· ${event.name}\n`);
        if (event.type === "progress") {
          const howFar = event.total ? `${event.progress} of ${event.total}` : String(event.progress);
          print(`· ${event.plugin}/${event.tool}: ${event.message ? `${event.message} ` : ""}(${howFar})\n`);
        }
        if (event.type === "retry")
          print(
            `· ${event.reason}: trying again in ${event.inSeconds} s (${event.attempt} of ${event.of})\n`,
            io.stderr,
          );
      };
      await printReply(io, () => sendMessage(baseUrl, password, line, undefined, progress), print);
      busy = false;
      await next();
    };
    rl.on("line", (line) => {
      if (interactive && busy && line.trim()) {
        void printReply(io, () => sendMessage(baseUrl, password, line), print);
        return;
      }
      pending.push(line);
      void next();
    });
    // Ctrl-C (a terminal's): stops the turn a reply is pending for, as /stop does; at the prompt,
    // ends the session.
    rl.on("SIGINT", () => {
      if (busy) void printReply(io, () => sendMessage(baseUrl, password, "/stop"), print);
      else finish(EXIT.ok);
    });
    rl.on("close", () => {
      closed = true;
      if (!busy && pending.length === 0) finish(EXIT.ok);
    });
    prompt();
  });
}

async function printReply(
  out: Output,
  send: () => Promise<string>,
  print: (text: string, stream: NodeJS.WritableStream) => void = (text, stream) => void stream.write(text),
): Promise<number> {
  try {
    print((await send()) + "\n", out.stdout);
    return EXIT.ok;
  } catch (error) {
    print(`${(error as Error).message}\n`, out.stderr);
    return error instanceof ClientError ? error.exitCode : EXIT.serverError;
  }
}

if (isMainModule(import.meta.url)) {
  const { argv, env, stdin, stdout, stderr } = process;
  process.exitCode = await runClient({ argv: argv.slice(2), env, stdin, stdout, stderr });
  // The session may end (Ctrl-C at the prompt) while stdin is still open.
  stdin.destroy();
}

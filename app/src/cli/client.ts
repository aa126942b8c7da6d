/**
 * `npm run chat`: talk to the assistant from a terminal over `POST /chat`.
 *   STAVROBOT_URL       default http://localhost:3000
 *   STAVROBOT_PASSWORD  the password from config.toml (required)
 *   -m "text"           send one message, print the reply, exit
 * Exit codes: 0 ok, 1 the server answered with an error, 2 usage or missing settings,
 * 3 the server could not be reached.
 */
import { createInterface } from "node:readline";
import { basicAuthHeader, isMainModule } from "@stavrobot/common";

export const EXIT = { ok: 0, serverError: 1, usage: 2, unreachable: 3 } as const;

export class ClientError extends Error {
  constructor(
    message: string,
    readonly exitCode: number,
  ) {
    super(message);
  }
}

export async function sendMessage(
  baseUrl: string,
  password: string,
  message: string,
  signal?: AbortSignal,
): Promise<string> {
  let response: Response;
  try {
    response = await fetch(`${baseUrl.replace(/\/+$/, "")}/chat`, {
      method: "POST",
      headers: { "Content-Type": "application/json", Authorization: basicAuthHeader(password) },
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
  const text = await response.text();
  let body: { response?: unknown; error?: unknown } = {};
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
  if (typeof body.response !== "string")
    throw new ClientError("The server sent an unexpected answer.", EXIT.serverError);
  return body.response;
}

export async function runClient(argv: string[], env: NodeJS.ProcessEnv): Promise<number> {
  const baseUrl = env.STAVROBOT_URL || "http://localhost:3000";
  const password = env.STAVROBOT_PASSWORD;
  const flag = argv.indexOf("-m");
  if (argv.includes("-h") || argv.includes("--help")) {
    process.stdout.write(
      'Usage: npm run chat [-- -m "message"]\nSet STAVROBOT_PASSWORD (and STAVROBOT_URL).\n',
    );
    return EXIT.ok;
  }
  if (!password) {
    process.stderr.write("Set STAVROBOT_PASSWORD to the password in your config.toml.\n");
    return EXIT.usage;
  }
  if (flag !== -1) {
    const message = argv[flag + 1];
    if (!message?.trim()) {
      process.stderr.write('-m needs a message, e.g. -m "hello"\n');
      return EXIT.usage;
    }
    return printReply(() => sendMessage(baseUrl, password, message));
  }
  return repl(baseUrl, password);
}

/**
 * Interactive mode. Lines are answered one after another, in order (so piped input works). On a
 * terminal, a line typed while a reply is pending is sent at once instead: the server treats it
 * as steering the running request, and `/stop` aborts it.
 */
function repl(baseUrl: string, password: string): Promise<number> {
  const interactive = Boolean(process.stdin.isTTY);
  const rl = createInterface({ input: process.stdin, output: process.stdout, terminal: interactive });
  const pending: string[] = [];
  let busy = false;
  let closed = false;
  let finished = false;
  process.stdout.write(
    `Connected to ${baseUrl}. Type a message; while a reply is pending, /stop aborts it and anything ` +
      `else steers it. An empty line or Ctrl-D exits.\n`,
  );
  return new Promise((resolve) => {
    const finish = (code: number) => {
      if (finished) return;
      finished = true;
      rl.close();
      // An empty line ends the session even though stdin is still open.
      process.stdin.destroy();
      resolve(code);
    };
    const prompt = () => {
      if (!closed) rl.prompt();
    };
    const next = async (): Promise<void> => {
      if (busy) return;
      const line = pending.shift();
      if (line === undefined) {
        if (closed) finish(EXIT.ok);
        else prompt();
        return;
      }
      if (!line.trim()) return finish(EXIT.ok);
      busy = true;
      await printReply(() => sendMessage(baseUrl, password, line));
      busy = false;
      await next();
    };
    rl.setPrompt("> ");
    rl.on("line", (line) => {
      if (interactive && busy && line.trim()) {
        void printReply(() => sendMessage(baseUrl, password, line));
        return;
      }
      pending.push(line);
      void next();
    });
    rl.on("close", () => {
      closed = true;
      if (!busy && pending.length === 0) finish(EXIT.ok);
    });
    prompt();
  });
}

async function printReply(send: () => Promise<string>): Promise<number> {
  try {
    process.stdout.write((await send()) + "\n");
    return EXIT.ok;
  } catch (error) {
    process.stderr.write(`${(error as Error).message}\n`);
    return error instanceof ClientError ? error.exitCode : EXIT.serverError;
  }
}

if (isMainModule(import.meta.url)) {
  process.exitCode = await runClient(process.argv.slice(2), process.env);
}

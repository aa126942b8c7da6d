/**
 * `npm run chat`: talk to the assistant from a terminal over `POST /chat`.
 *   STAVROBOT_URL       where the app is; default: the app running on DATA_DIR (its lock file),
 *                       else HOST and PORT as the app reads them, else http://127.0.0.1:3000
 *   STAVROBOT_PASSWORD  the password from config.toml (required)
 *   -m "text"           send one message, print the reply, exit
 * Exit codes: 0 ok, 1 the server answered with an error or the turn failed, 2 usage or missing settings,
 * 3 the server could not be reached.
 */
import { isMainModule } from "@stavrobot/common";
import { localCommand } from "./commands.js";
import { markSeen, formatAnswers, showKeptAnswers } from "./kept.js";
import { followAnswers, type KeptAnswer } from "./live.js";
import { progressLine } from "./progress.js";
import { repl } from "./repl.js";
import { EXIT, printReply, sendMessage } from "./send.js";
import { serverUrl } from "./server-url.js";

export { EXIT, ClientError } from "./send.js";
export type { Progress } from "./progress.js";

/**
 * What the client reads and writes: the process's own in `npm run chat`, in-memory streams in
 * tests.
 */
export interface ClientIo {
  argv: readonly string[];
  env: NodeJS.ProcessEnv;
  stdin: NodeJS.ReadableStream & { isTTY?: boolean };
  stdout: NodeJS.WritableStream & { isTTY?: boolean };
  stderr: NodeJS.WritableStream;
  /** Where DATA_DIR is relative to (default the process's working directory). */
  cwd?: string;
}

/** Runs the client to its end and returns the exit code. */
export async function runClient(io: ClientIo): Promise<number> {
  const { argv, env, stdout, stderr } = io;
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
  const server = serverUrl(env, io.cwd);
  if (flag !== -1) {
    const message = argv[flag + 1];
    if (!message?.trim()) {
      stderr.write('-m needs a message, e.g. -m "hello"\n');
      return EXIT.usage;
    }
    const local = localCommand(message);
    if (local !== undefined) {
      stdout.write(local);
      return EXIT.ok;
    }
    // What the turn does, as the REPL shows it, as it happens: on the terminal, or on stderr when
    // stdout is read by a program (which gets the answer alone).
    const aside = stdout.isTTY ? stdout : stderr;
    return printReply(io, () =>
      sendMessage(server, password, message, (event) => {
        const line = progressLine(event);
        if (line) (line.error ? stderr : aside).write(line.text);
      }),
    );
  }
  // Answers kept for the owner arrive while the session is open; until the REPL draws its first
  // prompt they are simply written.
  let show = (answer: KeptAnswer): void => void stdout.write(`Just in:\n${formatAnswers([answer])}\n\n`);
  const live = followAnswers({
    baseUrl: server.url,
    password,
    onAnswer: (answer) => {
      show(answer);
      void markSeen(server.url, password, [answer.id]);
    },
  });
  await showKeptAnswers(live, server.url, password, stdout);
  return repl(io, server, password, {
    live,
    follow: (print) => (show = (answer) => print(`Just in:\n${formatAnswers([answer])}\n\n`)),
  });
}

if (isMainModule(import.meta.url)) {
  const { argv, env, stdin, stdout, stderr } = process;
  process.exitCode = await runClient({ argv: argv.slice(2), env, stdin, stdout, stderr });
  // The session may end (Ctrl-C at the prompt) while stdin is still open.
  stdin.destroy();
}

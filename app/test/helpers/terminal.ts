import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { createServer, type Server } from "node:net";
import { vi } from "vitest";
import { NPM_START, NPM_START_ENV, freePort, repoRoot } from "./process.js";

/**
 * `npm start` at a terminal, as a person runs it the first time: on a pseudo-terminal of its own
 * (util-linux `script`; see `terminalMissing` in cli.ts), so the first start's questions are asked,
 * readline edits and echoes each line, and a secret answer is not echoed. In its own process group:
 * `stop()` reaches whatever the start went on to start.
 */
export interface Terminal {
  /** Everything the terminal showed so far (escape sequences included). */
  screen(): string;
  /** What it showed since the last `answer` (the question being asked, and what it said before it). */
  sinceLastAnswer(): string;
  /** Waits until the terminal shows `text` after what it showed at the last answer. */
  waitFor(text: string | RegExp, timeoutMs?: number): Promise<void>;
  /** Waits for `question`, then types `line` and Enter. */
  answer(question: string | RegExp, line: string): Promise<void>;
  /** The port the start listens on once the questions are over. */
  port: number;
  exited: Promise<number | null>;
  /** Ends the start and whatever it started (SIGTERM to its group), and waits for its exit. */
  stop(): Promise<number | null>;
}

const WAIT_MS = 30_000;

/** Escape sequences and carriage returns out, so what is asked can be matched as text. */
const ESCAPE = new RegExp(`${String.fromCharCode(27)}\\[[0-9;?]*[A-Za-z]`, "g");
export const plain = (text: string): string => text.replace(ESCAPE, "").replace(/\r/g, "");

/**
 * Starts `npm start` on a terminal with `env` (no config.toml at its CONFIG_PATH: the first start).
 * `endAfterQuestions`: its port is held by another listener, so once the questions are over the
 * start stops by itself, refusing the port in use, before it starts anything (no database needed).
 */
export async function firstStartInTerminal(
  env: NodeJS.ProcessEnv,
  options: { endAfterQuestions?: boolean } = {},
): Promise<Terminal> {
  const quote = (word: string) => `'${word.replace(/'/g, `'\\''`)}'`;
  const command = [process.execPath, ...NPM_START].map(quote).join(" ");
  const port = await freePort();
  const holder = options.endAfterQuestions ? await holdPort(port) : undefined;
  const ports = {
    PORT: String(port),
    INTERNAL_PORT: String(await freePort()),
    PLUGIN_RUNNER_PORT: String(await freePort()),
    PYTHON_RUNNER_PORT: String(await freePort()),
    CODER_PORT: String(await freePort()),
    SIGNAL_BRIDGE_PORT: String(await freePort()),
    WHATSAPP_BRIDGE_PORT: String(await freePort()),
  };
  const terminalEnv: NodeJS.ProcessEnv = { ...env, ...NPM_START_ENV, ...ports, TERM: "xterm" };
  // A person's terminal, not CI: the first start asks only there.
  delete terminalEnv.CI;
  const child = spawn("script", ["-qfec", `stty cols 100 rows 40; exec ${command}`, "/dev/null"], {
    cwd: repoRoot,
    env: terminalEnv,
    stdio: "pipe",
    detached: true,
  });
  let shown = "";
  let mark = 0;
  child.stdout.setEncoding("utf8").on("data", (chunk: string) => (shown += chunk));
  child.stderr.setEncoding("utf8").on("data", (chunk: string) => (shown += chunk));
  const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
  // script runs the start in a session of its own on the terminal: its process group is the start's.
  const started = child.pid as number;
  const signal = (name: NodeJS.Signals | 0): boolean => {
    let any = false;
    for (const group of [started, ...childrenOf(started)]) {
      try {
        process.kill(-group, name);
        any = true;
      } catch {
        // That group is gone.
      }
    }
    return any;
  };
  const killer = setTimeout(() => signal("SIGKILL"), 180_000);
  void exited.then(() => {
    clearTimeout(killer);
    holder?.close();
  });
  const waitFor = async (text: string | RegExp, timeoutMs = WAIT_MS) => {
    await vi.waitFor(
      () => {
        const since = plain(shown.slice(mark));
        if (typeof text === "string" ? !since.includes(text) : !text.test(since))
          throw new Error(`the terminal did not show ${String(text)}; it showed:\n${plain(shown)}`);
      },
      { timeout: timeoutMs, interval: 50 },
    );
  };
  return {
    port,
    exited,
    screen: () => shown,
    sinceLastAnswer: () => shown.slice(mark),
    waitFor,
    async answer(question, line) {
      await waitFor(question);
      mark = shown.length;
      child.stdin.write(`${line}\r`);
    },
    async stop() {
      signal("SIGTERM");
      const code = await exited;
      await vi.waitUntil(() => !signal(0), { timeout: 10_000 });
      return code;
    },
  };
}

/** A process's children (Linux's /proc), none once it is gone. */
function childrenOf(pid: number): number[] {
  try {
    return readFileSync(`/proc/${pid}/task/${pid}/children`, "utf8")
      .trim()
      .split(/\s+/)
      .filter(Boolean)
      .map(Number);
  } catch {
    return [];
  }
}

/** Listens on `port` (as another program would) until closed. */
async function holdPort(port: number): Promise<Server> {
  const server = createServer();
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, "0.0.0.0", () => resolve());
  });
  return server;
}

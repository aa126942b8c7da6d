import { spawn, spawnSync } from "node:child_process";
import type { Writable } from "node:stream";
import { fileURLToPath } from "node:url";

export const REPO_ROOT = fileURLToPath(new URL("../../../", import.meta.url));
export const CLIENT = "app/src/cli/client.ts";

/** A running client: what it printed so far, and how it ended. */
export interface Session {
  stdin: Writable;
  stdout: () => string;
  stderr: () => string;
  exit: Promise<number | null>;
  /** Ends it at once (a test that failed midway). */
  kill(): void;
}

/** The environment of `npm run chat`, with only the given STAVROBOT_* set. */
function clientEnv(extra: Record<string, string>): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env };
  for (const key of Object.keys(env)) if (key.startsWith("STAVROBOT_")) delete env[key];
  delete env.NODE_OPTIONS;
  return { ...env, ...extra };
}

function session(command: string, args: string[], env: NodeJS.ProcessEnv, cwd: string): Session {
  const child = spawn(command, args, { cwd, env, stdio: "pipe" });
  let stdout = "";
  let stderr = "";
  child.stdout.setEncoding("utf8").on("data", (chunk: string) => (stdout += chunk));
  child.stderr.setEncoding("utf8").on("data", (chunk: string) => (stderr += chunk));
  const killer = setTimeout(() => child.kill("SIGKILL"), 60_000);
  const exit = new Promise<number | null>((resolve, reject) => {
    child.on("error", reject);
    child.on("close", (code) => {
      clearTimeout(killer);
      resolve(code);
    });
  });
  return {
    stdin: child.stdin,
    stdout: () => stdout,
    stderr: () => stderr,
    exit,
    kill: () => void child.kill("SIGKILL"),
  };
}

const CLIENT_ARGS = ["--conditions=source", "--import", "tsx", CLIENT];

/** The client as `npm run chat` runs it: its own process, reading a pipe. */
export function asProcess(argv: string[], extra: Record<string, string>, cwd = REPO_ROOT): Session {
  return session(process.execPath, [...CLIENT_ARGS, ...argv], clientEnv(extra), cwd);
}

/**
 * util-linux `script`, which runs a command on a pseudo-terminal of its own (part of every
 * Debian system); undefined where it is missing, with the reason.
 */
export const terminalMissing: string | undefined = (() => {
  const probe = spawnSync("script", ["--version"], { encoding: "utf8" });
  if (probe.error || probe.status !== 0 || !/util-linux/.test(probe.stdout))
    return "util-linux `script` (which gives the client a terminal) is not installed";
  return undefined;
})();

/**
 * The client in a terminal, as a person runs `npm run chat`: on a pseudo-terminal (through
 * `script`), so readline edits the line in place and echoes what is typed. Write `\r` for Enter.
 * Everything it draws, escape sequences included, comes out on `stdout`.
 */
export function inTerminal(extra: Record<string, string>, argv: string[] = []): Session {
  const quote = (word: string) => `'${word.replace(/'/g, `'\\''`)}'`;
  const command = [process.execPath, ...CLIENT_ARGS, ...argv].map(quote).join(" ");
  // A plain terminal 80 columns wide; -e: the client's exit code is script's.
  const env = { ...clientEnv(extra), TERM: "xterm", COLUMNS: "80", LINES: "24" };
  return session("script", ["-qfec", `stty cols 80 rows 24; exec ${command}`, "/dev/null"], env, REPO_ROOT);
}

/**
 * Where `npm run chat` finds the app, as the app itself and `npm run doctor` do: STAVROBOT_URL
 * when set; else the app running on the data directory (DATA_DIR, default `data`), whose lock file
 * records where it listens; else HOST and PORT as the app reads them (default 127.0.0.1:3000).
 */
import { readFileSync } from "node:fs";
import { join, resolve } from "node:path";

/** The app's lock file in its data directory (app/src/boot/instance-lock.ts writes it). */
const LOCK_FILE = "instance.lock";

export interface ServerUrl {
  url: string;
  /** How it was chosen, for a message that says what to change when it cannot be reached. */
  from: "STAVROBOT_URL" | "lock" | "PORT" | "default";
}

export function serverUrl(env: NodeJS.ProcessEnv, cwd = process.cwd()): ServerUrl {
  if (env.STAVROBOT_URL) return { url: env.STAVROBOT_URL, from: "STAVROBOT_URL" };
  const running = runningApp(resolve(cwd, env.DATA_DIR || "data"));
  if (running) return { url: urlOf(running.host ?? env.HOST, running.port), from: "lock" };
  const port = Number(env.PORT);
  if (env.PORT && Number.isInteger(port) && port > 0 && port <= 65535)
    return { url: urlOf(env.HOST, port), from: "PORT" };
  return { url: urlOf(env.HOST, 3000), from: "default" };
}

/** What to say about where the URL came from, after "Cannot reach <url>". */
export function howChosen(server: ServerUrl): string {
  switch (server.from) {
    case "STAVROBOT_URL":
      return "Check STAVROBOT_URL.";
    case "lock":
      return "The app's data directory says it listens there; is it still starting, or did it stop?";
    case "PORT":
      return "Is the app running (npm start) with this PORT? Set STAVROBOT_URL if it listens elsewhere.";
    case "default":
      return "Is the app running (npm start)? Set STAVROBOT_URL (or PORT) if it listens elsewhere.";
  }
}

/** The port (and address) the running app recorded in its lock file; none when it is not running. */
function runningApp(dataDir: string): { port: number; host?: string } | undefined {
  let record: { pid?: unknown; processStart?: unknown; port?: unknown; host?: unknown };
  try {
    record = JSON.parse(readFileSync(join(dataDir, LOCK_FILE), "utf8")) as typeof record;
  } catch {
    // No lock (not running here), or one being written: the variables decide.
    return undefined;
  }
  const { pid, processStart, port, host } = record;
  if (typeof pid !== "number" || pid <= 0 || typeof port !== "number" || !alive(pid)) return undefined;
  // A lock left by an app that was killed, its pid since given to another process.
  if (typeof processStart === "string" && startOf(pid) !== undefined && startOf(pid) !== processStart)
    return undefined;
  return { port, ...(typeof host === "string" ? { host } : {}) };
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    // Another user's process is alive too.
    return (error as NodeJS.ErrnoException).code === "EPERM";
  }
}

/** When the process started, in clock ticks since boot (Linux's /proc/<pid>/stat, field 22). */
function startOf(pid: number): string | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    return stat.slice(stat.lastIndexOf(")") + 2).split(" ")[19];
  } catch {
    return undefined;
  }
}

/** An address the app listens on as one to connect to: every address (or none said) is this machine's. */
function urlOf(host: string | undefined, port: number): string {
  const address = !host || /^(0\.0\.0\.0|::|\[::\])$/.test(host) ? "127.0.0.1" : host;
  return `http://${address.includes(":") && !address.startsWith("[") ? `[${address}]` : address}:${port}`;
}

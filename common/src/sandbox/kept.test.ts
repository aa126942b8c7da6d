import { chmodSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { pathWithoutBubblewrap, processesMatching, requires } from "../test-support/fixtures.js";
import { silentLogger } from "../logger.js";
import { JsonLines, ProcessGoneError } from "./json-lines.js";
import { KeptProcess, TimedOutError } from "./kept.js";
import { Sandbox, which } from "./sandbox.js";

const isRoot = process.getuid?.() === 0;
const hasBwrap = which("bwrap", process.env.PATH ?? "") !== undefined;
const node = which("node", "/usr/local/bin:/usr/bin:/bin");

/**
 * A small JSON-lines server: `echo` answers its input, `spin` loops on the CPU for ever after
 * starting a child that sleeps (so a kill must end the whole tree), `die` exits 3, and it says
 * `hello` (an event, no id) when it starts.
 */
const SERVER = `
const { spawn } = require("node:child_process");
const readline = require("node:readline");
process.stdout.write(JSON.stringify({ event: "hello", pid: process.pid }) + "\\n");
readline.createInterface({ input: process.stdin }).on("line", (line) => {
  const message = JSON.parse(line);
  if (message.op === "echo") process.stdout.write(JSON.stringify({ id: message.id, value: message.value }) + "\\n");
  if (message.op === "spin") { spawn("sleep", ["3117"], { stdio: "ignore" }); for (;;) {} }
  if (message.op === "die") { process.stderr.write("dying on request\\n"); process.exit(3); }
});
`;

const modes = [
  ...(requires("bubblewrap is not installed", hasBwrap) ? ["bubblewrap" as const] : []),
  ...(requires("util-linux unshare needs root", isRoot) ? ["unshare" as const] : []),
];

let root: string;
let script: string;
beforeAll(() => {
  root = mkdtempSync(join(tmpdir(), "kept-test-"));
  chmodSync(root, 0o755);
  script = join(root, "server.js");
  writeFileSync(script, SERVER, { mode: 0o644 });
});
afterAll(() => rmSync(root, { recursive: true, force: true }));

describe.runIf(node !== undefined).each(modes)("a kept process in the %s sandbox", (kind) => {
  const sandbox = Sandbox.create({
    logger: silentLogger,
    ...(kind === "unshare" ? { path: pathWithoutBubblewrap() } : {}),
  });
  const events: Record<string, unknown>[] = [];
  const kept = new KeptProcess<JsonLines>({
    name: "test-server",
    logger: silentLogger,
    restartDelayMs: 50,
    async start() {
      const process = sandbox.start({
        command: node as string,
        args: ["/srv/server.js"],
        cwd: "/",
        env: { PATH: "/usr/bin:/bin" },
        mounts: [{ source: script, target: "/srv/server.js" }],
        network: false,
        ...(isRoot ? { user: { uid: 65534, gid: 65534 } } : {}),
      });
      const session = new JsonLines(process);
      session.onMessage((message) => events.push(message));
      return { process, session };
    },
  });
  afterAll(() => kept.stop(200));

  it("answers requests over stdio and passes its own messages on", async () => {
    const answer = await kept.use((session) => session.request({ op: "echo", value: "ping" }), 10_000);
    expect(answer.value).toBe("ping");
    await vi.waitFor(() => expect(events.some((event) => event.event === "hello")).toBe(true));
  });

  it("kills a call that outlives its time, with everything it started, and starts again on the next use", async () => {
    const before = kept.pid as number;
    await expect(kept.use((session) => session.request({ op: "spin" }), 1_000)).rejects.toThrow(
      TimedOutError,
    );
    await vi.waitFor(() => expect(alive(before)).toBe(false), { timeout: 5_000 });
    await vi.waitFor(() => expect(processesMatching("sleep 3117")).toEqual([]), { timeout: 5_000 });
    const answer = await kept.use((session) => session.request({ op: "echo", value: "again" }), 10_000);
    expect(answer.value).toBe("again");
    expect(kept.pid).not.toBe(before);
  });

  it("fails the calls in flight when it crashes, saying how, and restarts by itself", async () => {
    const starts = kept.starts;
    const error = await kept
      .use((session) => session.request({ op: "die" }), 10_000)
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ProcessGoneError);
    expect(String(error)).toMatch(/exited with code 3: dying on request/);
    await vi.waitFor(() => expect(kept.starts).toBe(starts + 1), { timeout: 5_000 });
    expect(kept.running).toBe(true);
  });
});

describe.runIf(node !== undefined)("a kept process in the plain sandbox", () => {
  const sandbox = Sandbox.create({ logger: silentLogger, disableNamespaces: true });

  it("answers, is killed on timeout with its whole group, and is stopped for good", async () => {
    const kept = new KeptProcess<JsonLines>({
      name: "plain-server",
      logger: silentLogger,
      async start() {
        const process = sandbox.start({
          command: node as string,
          args: [script],
          cwd: root,
          env: { PATH: "/usr/bin:/bin" },
          ...(isRoot ? { user: { uid: 65534, gid: 65534 } } : {}),
        });
        return { process, session: new JsonLines(process) };
      },
    });
    expect((await kept.use((s) => s.request({ op: "echo", value: 1 }), 10_000)).value).toBe(1);
    const before = kept.pid as number;
    await expect(kept.use((s) => s.request({ op: "spin" }), 1_000)).rejects.toThrow(TimedOutError);
    await vi.waitFor(() => expect(alive(before)).toBe(false), { timeout: 5_000 });
    await vi.waitFor(() => expect(processesMatching("sleep 3117")).toEqual([]), { timeout: 5_000 });
    expect((await kept.use((s) => s.request({ op: "echo", value: 2 }), 10_000)).value).toBe(2);
    const last = kept.pid as number;
    await kept.stop(200);
    expect(alive(last)).toBe(false);
    await expect(kept.session()).rejects.toThrow(/stopped/);
  });

  it("reports a process the sandbox could not start", async () => {
    const process = sandbox.start({ command: "/nonexistent/program", cwd: "/", env: {} });
    const exit = await process.exited;
    expect(exit.spawnError).toMatch(/ENOENT/);
    await expect(new JsonLines(process).request({ op: "echo" })).rejects.toThrow(ProcessGoneError);
  });
});

/** Whether a process (or its group) is still there. */
function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

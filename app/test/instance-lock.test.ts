import { spawn, type ChildProcess } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it, vi } from "vitest";
import { StartRefused } from "@stavrobot/common";
import { acquireInstanceLock, runningInstance, type InstanceLock } from "../src/boot/instance-lock.js";
import { repoRoot } from "./helpers/process.js";

// The data directory's lock against holders in every state a real one can be in: running,
// stopping cleanly, killed but not yet reaped by its parent (a zombie).

const HOLDER = [
  process.execPath,
  "--conditions=source",
  "--import",
  "tsx",
  "app/test/helpers/lock-holder.ts",
];
/** Longer than any test here runs: a start that waited for a holder would fail the test by its timeout. */
const AN_HOUR = 3_600_000;

const children: ChildProcess[] = [];
const locks: InstanceLock[] = [];
const dirs: string[] = [];

afterEach(() => {
  for (const lock of locks.splice(0)) lock.release();
  for (const child of children.splice(0)) child.kill("SIGKILL");
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

function dataDir(): string {
  const dir = mkdtempSync(join(tmpdir(), "stavrobot-lock-"));
  dirs.push(dir);
  return dir;
}

/** Spawns `command`, resolving with the pid of the holder once it has said it holds the lock. */
async function spawnHolder(command: string[]): Promise<{ child: ChildProcess; holder: number }> {
  const child = spawn(command[0] as string, command.slice(1), {
    cwd: repoRoot,
    stdio: ["ignore", "pipe", "pipe"],
  });
  children.push(child);
  let output = "";
  child.stderr?.on("data", (chunk: Buffer) => (output += chunk.toString()));
  const holder = await new Promise<number>((resolve, reject) => {
    child.stdout?.on("data", (chunk: Buffer) => {
      output += chunk.toString();
      const locked = /locked (\d+)/.exec(output);
      if (locked) resolve(Number(locked[1]));
    });
    child.once("exit", () => reject(new Error(`the holder exited:\n${output}`)));
  });
  return { child, holder };
}

/** Field 3 of /proc/<pid>/stat: R, S, Z (zombie)…; undefined once the process is gone. */
function processState(pid: number): string | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    return stat.slice(stat.lastIndexOf(")") + 2).split(" ")[0];
  } catch {
    return undefined;
  }
}

const recordedPid = (dir: string): number =>
  (JSON.parse(readFileSync(join(dir, "instance.lock"), "utf8")) as { pid: number }).pid;

describe("the instance lock", () => {
  it("refuses at once while its holder runs, naming its pid", async () => {
    const dir = dataDir();
    const { holder } = await spawnHolder([...HOLDER, dir]);
    const refusal = await acquireInstanceLock(dir, { waitMs: AN_HOUR }).then(
      () => undefined,
      (error: unknown) => error,
    );
    expect(refusal).toBeInstanceOf(StartRefused);
    expect((refusal as StartRefused).message).toContain(`Another Stavrobot (pid ${holder}) is running`);
    expect(runningInstance(dir)?.pid).toBe(holder);
  }, 60_000);

  it("takes over at once from a holder killed with kill -9 that its parent has not reaped (a zombie)", async () => {
    if (process.platform !== "linux") return;
    const dir = dataDir();
    // The holder's parent never collects its exit status (sh, replaced by sleep), as npm start's
    // launcher after a kill -9 of its process group stays a zombie until init reaps it.
    const { holder } = await spawnHolder(["sh", "-c", '"$@" & exec sleep 3600', "sh", ...HOLDER, dir]);
    process.kill(holder, "SIGKILL");
    await vi.waitUntil(() => processState(holder) === "Z", { timeout: 10_000, interval: 20 });
    expect(recordedPid(dir)).toBe(holder);
    expect(runningInstance(dir)).toBeUndefined();

    const lock = await acquireInstanceLock(dir, { waitMs: AN_HOUR });
    locks.push(lock);
    expect(recordedPid(dir)).toBe(process.pid);
    // It is still a zombie: it was not waited for.
    expect(processState(holder)).toBe("Z");
  }, 60_000);

  it("waits for a holder that is stopping, and takes the lock once it has stopped", async () => {
    const dir = dataDir();
    const { child, holder } = await spawnHolder([...HOLDER, dir, "--stopping"]);
    let settled = false;
    const acquiring = acquireInstanceLock(dir, { waitMs: AN_HOUR }).finally(() => (settled = true));
    // The holder, still alive and stopping, keeps its lock while the start waits.
    await vi.waitUntil(() => processState(holder) !== undefined);
    expect(settled).toBe(false);
    expect(recordedPid(dir)).toBe(holder);

    const exited = new Promise((resolve) => child.once("exit", resolve));
    child.kill("SIGTERM");
    const lock = await acquiring;
    locks.push(lock);
    await exited;
    expect(recordedPid(dir)).toBe(process.pid);
  }, 60_000);

  it("refuses a holder still stopping once the wait is over, saying it is stopping", async () => {
    const dir = dataDir();
    const { holder } = await spawnHolder([...HOLDER, dir, "--stopping"]);
    const refusal = await acquireInstanceLock(dir, { waitMs: 200 }).then(
      () => undefined,
      (error: unknown) => error,
    );
    expect((refusal as StartRefused).message).toContain(
      `Another Stavrobot (pid ${holder}) is still stopping on the data directory ${dir}`,
    );
    expect(existsSync(join(dir, "instance.lock"))).toBe(true);
  }, 60_000);
});

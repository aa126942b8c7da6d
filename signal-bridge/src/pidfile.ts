import { readFile, rm } from "node:fs/promises";
import type { Logger } from "@stavrobot/common";
import { writeFileAtomic } from "@stavrobot/common";

/**
 * The pid of the signal-cli daemon the bridge runs, kept on disk. A bridge that is killed outright
 * (SIGKILL, e.g. by `npm start`'s launcher when stopping takes too long) leaves its signal-cli
 * running: holding the HTTP port and the account's database lock, so the next one could never
 * start. The next bridge finds it through this file and stops it first.
 */

export async function rememberPid(file: string, pid: number): Promise<void> {
  await writeFileAtomic(file, `${pid}\n`).catch(() => undefined);
}

export async function forgetPid(file: string, pid: number | undefined): Promise<void> {
  if (pid === undefined || (await readPid(file)) !== pid) return;
  await rm(file, { force: true }).catch(() => undefined);
}

/**
 * Stops the signal-cli daemon a previous bridge left behind, if it still runs. Only a process whose
 * command line is a `daemon --http` is touched (the pid may have been reused since); where the
 * command line cannot be read (no /proc), nothing is killed.
 */
export async function reapOrphan(file: string, logger: Logger): Promise<void> {
  const pid = await readPid(file);
  if (pid === undefined) return;
  const cmdline = await readFile(`/proc/${pid}/cmdline`, "utf8").catch(() => "");
  const args = cmdline.split("\0");
  if (args.includes("daemon") && args.includes("--http")) {
    logger.warn("stopping a signal-cli left running by a previous bridge", { pid });
    signal(pid, "SIGTERM");
    const deadline = Date.now() + 3_000;
    while ((await alive(pid)) && Date.now() < deadline)
      await new Promise((resolve) => setTimeout(resolve, 50));
    if (await alive(pid)) signal(pid, "SIGKILL");
  }
  await rm(file, { force: true }).catch(() => undefined);
}

async function readPid(file: string): Promise<number | undefined> {
  const text = await readFile(file, "utf8").catch(() => "");
  const pid = Number(text.trim());
  return Number.isInteger(pid) && pid > 1 ? pid : undefined;
}

/** To its process group (the bridge starts signal-cli as a group leader), else to the process. */
function signal(pid: number, name: NodeJS.Signals): void {
  try {
    process.kill(-pid, name);
  } catch {
    try {
      process.kill(pid, name);
    } catch {
      // Gone already.
    }
  }
}

/** Running, not merely a zombie waiting for an init that may never reap it. */
async function alive(pid: number): Promise<boolean> {
  const stat = await readFile(`/proc/${pid}/stat`, "utf8").catch(() => "");
  // The state follows the parenthesised command name, which may itself contain ") ".
  return stat !== "" && !stat.slice(stat.lastIndexOf(")") + 2).startsWith("Z");
}

import { createHash } from "node:crypto";
import { readFile, readdir } from "node:fs/promises";
import type { Logger } from "@stavrobot/common";
import { SerialLock } from "./background.js";
import type { Owner } from "./fs-safe.js";
import { runProcess } from "./process.js";

/**
 * One system user per plugin when the runner is root; nothing at all otherwise (local development,
 * where every plugin runs as the developer).
 */
export interface Isolation {
  readonly enabled: boolean;
  /** Creates the plugin's user if needed; `undefined` when isolation is off. */
  ensureUser(plugin: string): Promise<Owner | undefined>;
  /** The plugin's user if it exists; `undefined` when isolation is off or there is none. */
  lookupUser(plugin: string): Promise<Owner | undefined>;
  removeUser(plugin: string): Promise<void>;
  /** SIGKILLs every process running as the plugin's user (before removing it, after a timed-out run). */
  killProcesses(plugin: string): Promise<void>;
}

const MAX_USER_NAME = 32;

/**
 * `plug_<name with - → _>`. Names that would not fit in 32 characters keep a readable prefix plus
 * a hash of the full name, so that two long plugin names never share one user (plain truncation
 * would let them read each other's files).
 */
export function pluginUserName(plugin: string): string {
  const plain = `plug_${plugin.replaceAll("-", "_")}`;
  if (plain.length <= MAX_USER_NAME) return plain;
  const hash = createHash("sha256").update(plugin).digest("hex").slice(0, 8);
  return `${plain.slice(0, MAX_USER_NAME - hash.length - 1)}_${hash}`;
}

export function createIsolation(options: { enabled: boolean; logger: Logger }): Isolation {
  if (!options.enabled) {
    return {
      enabled: false,
      ensureUser: async () => undefined,
      lookupUser: async () => undefined,
      removeUser: async () => {},
      killProcesses: async () => {},
    };
  }
  const logger = options.logger;
  // useradd/userdel lock /etc/passwd: one at a time from this process, retries against others.
  const lock = new SerialLock();
  const serial = <T>(work: () => Promise<T>): Promise<T> => lock.run(work);

  const lookupUser = async (plugin: string): Promise<Owner | undefined> => {
    const passwd = await readFile("/etc/passwd", "utf8");
    const name = pluginUserName(plugin);
    for (const line of passwd.split("\n")) {
      const fields = line.split(":");
      if (fields[0] === name) return { uid: Number(fields[2]), gid: Number(fields[3]) };
    }
    return undefined;
  };

  return {
    enabled: true,
    lookupUser,
    ensureUser: (plugin) =>
      serial(async () => {
        const name = pluginUserName(plugin);
        const existing = await lookupUser(plugin);
        if (existing) return notRoot(name, existing);
        const args = [
          "--system",
          "--no-create-home",
          "--home-dir",
          "/nonexistent",
          "--shell",
          "/usr/sbin/nologin",
        ];
        await admin("useradd", [...args, name], [0, 9], logger);
        const created = await lookupUser(plugin);
        if (!created) throw new Error(`User ${name} was not created`);
        logger.info("created plugin user", { plugin, user: name, uid: created.uid });
        return notRoot(name, created);
      }),
    removeUser: (plugin) =>
      serial(async () => {
        await admin("userdel", [pluginUserName(plugin)], [0, 6], logger);
      }),
    killProcesses: async (plugin) => {
      const owner = await lookupUser(plugin);
      if (owner) await killUserProcesses(owner.uid);
    },
  };
}

function notRoot(name: string, owner: Owner): Owner {
  if (owner.uid === 0 || owner.gid === 0) throw new Error(`User ${name} maps to root; refusing to use it`);
  return owner;
}

/** Runs useradd/userdel, tolerating the given exit codes and retrying while /etc/passwd is locked. */
async function admin(command: string, args: string[], okCodes: number[], logger: Logger): Promise<void> {
  for (let attempt = 0; ; attempt++) {
    const result = await runProcess({
      command,
      args,
      cwd: "/",
      env: { PATH: "/usr/sbin:/usr/bin:/sbin:/bin" },
      timeoutMs: 30_000,
      stdoutLimitBytes: 16_384,
      stderrLimitBytes: 16_384,
    });
    if (result.exitCode !== null && okCodes.includes(result.exitCode)) return;
    const detail = result.spawnError ?? (result.stderr.trim() || `exit code ${result.exitCode}`);
    if (/lock/i.test(detail) && attempt < 20) {
      logger.debug("user database busy, retrying", { command });
      await new Promise((resolve) => setTimeout(resolve, 50 + Math.random() * 150));
      continue;
    }
    throw new Error(`${command} ${args.join(" ")} failed: ${detail}`);
  }
}

/**
 * SIGKILLs every live process of `uid`, pass after pass until one finds none, so that a process
 * forking while it is being swept does not leave a child behind (bounded, in case of a fork bomb).
 */
async function killUserProcesses(uid: number): Promise<void> {
  for (let pass = 0; pass < 10; pass++) {
    if ((await killUserProcessesOnce(uid)) === 0) return;
  }
}

async function killUserProcessesOnce(uid: number): Promise<number> {
  let killed = 0;
  const entries = await readdir("/proc").catch(() => [] as string[]);
  for (const entry of entries) {
    if (!/^\d+$/.test(entry)) continue;
    const status = await readFile(`/proc/${entry}/status`, "utf8").catch(() => "");
    const match = /^Uid:\s+(\d+)/m.exec(status);
    // Zombies are already dead; they only wait for their parent.
    if (!match || Number(match[1]) !== uid || /^State:\s+Z/m.test(status)) continue;
    try {
      process.kill(Number(entry), "SIGKILL");
      killed++;
    } catch {
      // Already gone.
    }
  }
  return killed;
}

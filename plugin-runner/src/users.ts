import { createHash } from "node:crypto";
import {
  SerialLock,
  ensureSystemUser,
  killUserProcesses,
  lookupSystemUser,
  removeSystemUser,
} from "@stavrobot/common";
import type { Logger, Owner } from "@stavrobot/common";

/**
 * One system user per plugin when the plugin-runner is root; nothing at all otherwise (local
 * development, where every plugin runs as the developer).
 */
export interface Isolation {
  readonly enabled: boolean;
  /** Creates the plugin's user if needed; `undefined` when isolation is off. */
  ensureUser(plugin: string): Promise<Owner | undefined>;
  /** The plugin's user if it exists; `undefined` when isolation is off or there is none. */
  lookupUser(plugin: string): Promise<Owner | undefined>;
  removeUser(plugin: string): Promise<void>;
  /** SIGKILLs every process running as the plugin's user (before removing it, after a run). */
  killProcesses(plugin: string): Promise<void>;
  /** The same for several plugins in one pass over /proc (at start-up). */
  killProcessesOf(plugins: readonly string[]): Promise<void>;
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

/** The plugin users, on common's system users. */
export function createIsolation(options: { enabled: boolean; logger: Logger }): Isolation {
  if (!options.enabled) {
    return {
      enabled: false,
      ensureUser: async () => undefined,
      lookupUser: async () => undefined,
      removeUser: async () => {},
      killProcesses: async () => {},
      killProcessesOf: async () => {},
    };
  }
  const { logger } = options;
  // useradd/userdel lock /etc/passwd: one at a time from this process (they retry against others).
  const lock = new SerialLock();
  const lookupUser = (plugin: string) => lookupSystemUser(pluginUserName(plugin));
  const uidsOf = async (plugins: readonly string[]): Promise<number[]> => {
    const uids: number[] = [];
    for (const plugin of plugins) {
      const owner = await lookupUser(plugin);
      if (owner) uids.push(owner.uid);
    }
    return uids;
  };
  return {
    enabled: true,
    lookupUser,
    ensureUser: (plugin) => lock.run(() => ensureSystemUser(pluginUserName(plugin), logger)),
    removeUser: (plugin) => lock.run(() => removeSystemUser(pluginUserName(plugin), logger)),
    killProcesses: async (plugin) => killUserProcesses(await uidsOf([plugin])),
    killProcessesOf: async (plugins) => killUserProcesses(await uidsOf(plugins)),
  };
}

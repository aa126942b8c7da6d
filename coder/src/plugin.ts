import { lstat } from "node:fs/promises";
import { join } from "node:path";
import {
  DomainError,
  PLUGIN_NAME_PATTERN,
  addSystemUser,
  errorMessage,
  hasAccount,
  pathExists,
} from "@stavrobot/common";
import type { Logger, Owner } from "@stavrobot/common";

/**
 * Why the coder will not work on a plugin; the message is meant for the assistant. At submission
 * it makes the request invalid; when a queued task starts, it becomes the task's failure.
 */
export class PluginRefusal extends DomainError {
  constructor(message: string) {
    super("invalid", message);
    this.name = "PluginRefusal";
  }
}

/** A plugin the coder may change, and the Unix user its agent runs as (when the service is root). */
export interface PluginTarget {
  name: string;
  /** Absolute path on this machine. */
  dir: string;
  owner?: Owner;
}

/**
 * Checks that `name` is an editable plugin the coder may hand to the agent: a real directory (not a
 * symlink) in the plugins directory, not installed from git (only editable plugins may change:
 * a git plugin would lose the edits on its next update), with no symlinked `.claude` (where the
 * credentials are lent). As root, the agent runs as the directory's owner, which must not be root.
 * Checked when a task is accepted and again when it starts.
 */
export async function inspectPlugin(
  pluginsDir: string,
  name: string,
  asRoot: boolean,
): Promise<PluginTarget> {
  if (!PLUGIN_NAME_PATTERN.test(name) || name.length > 64) {
    throw new PluginRefusal(`Invalid plugin name "${name}": use lowercase letters, digits and hyphens only.`);
  }
  const dir = join(pluginsDir, name);
  const info = await lstat(dir).catch(() => undefined);
  if (!info) throw new PluginRefusal(`Plugin "${name}" does not exist.`);
  if (info.isSymbolicLink()) {
    throw new PluginRefusal(
      `The directory of plugin "${name}" is a symlink; the coder refuses to work on it.`,
    );
  }
  if (!info.isDirectory()) throw new PluginRefusal(`Plugin "${name}" is not a directory.`);
  if (await pathExists(join(dir, ".git"))) {
    throw new PluginRefusal(
      `Plugin "${name}" was installed from git, so the coder may not change it: only editable plugins ` +
        "(made with manage_plugins create) can be changed.",
    );
  }
  const claudeDir = await lstat(join(dir, ".claude")).catch(() => undefined);
  if (claudeDir?.isSymbolicLink()) {
    throw new PluginRefusal(
      `The .claude directory of plugin "${name}" is a symlink; the coder refuses to use it.`,
    );
  }
  if (!asRoot) return { name, dir };
  if (info.uid === 0 || info.gid === 0) {
    throw new PluginRefusal(
      `The directory of plugin "${name}" belongs to root, and the coding agent never runs as root. ` +
        "The plugin-runner gives every plugin its own user (restart it to adopt a plugin copied in by hand).",
    );
  }
  return { name, dir, owner: { uid: info.uid, gid: info.gid } };
}

/**
 * Makes sure the plugin's uid has an entry in this machine's user database: in its own container
 * the coder does not share the plugin-runner's users, and programs (Node's `os.userInfo()`, the
 * shell) look the current user up. A missing entry is added as `coder_u<uid>`, with no home and no
 * login shell.
 */
export async function ensureAccount(owner: Owner, logger: Logger): Promise<void> {
  if (await hasAccount(owner.uid)) return;
  try {
    await addSystemUser(`coder_u${owner.uid}`, { uid: owner.uid, logger });
  } catch (error) {
    // Only cosmetic for the agent, so it is logged rather than failing the task.
    logger.warn("could not add a user entry for a plugin's uid", {
      uid: owner.uid,
      error: errorMessage(error),
    });
  }
}

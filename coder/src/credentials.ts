import { constants } from "node:fs";
import { lstat, mkdir, open, unlink } from "node:fs/promises";
import type { FileHandle } from "node:fs/promises";
import { join } from "node:path";
import { SerialLock, entryOf, openDirNoFollow, readFileNoFollow, writeFileAtomic } from "@stavrobot/common";
import type { Owner } from "@stavrobot/common";

/**
 * Lends the owner's Claude subscription login to one task: `.credentials.json` is copied from the
 * credentials directory into `<plugin>/.claude/` (where the CLI, with HOME = the plugin directory,
 * looks for it) before the run, and after the run copied back (the CLI may have refreshed the
 * token) and removed. The service is root and the plugin directory belongs to an untrusted user, so
 * nothing on either side is reached through a symlink: files are opened with O_NOFOLLOW, written
 * atomically (a planted symlink is replaced, never followed), and inside the plugin every access
 * goes through a descriptor of the real `.claude` directory, so swapping it for a symlink midway
 * redirects nothing.
 */

export const CREDENTIALS_FILE = ".credentials.json";
const MAX_BYTES = 256 * 1024;
const O_READ = constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK;

/** A credentials setup the coder refuses; the message becomes the task's failure reason. */
export class CredentialsError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "CredentialsError";
  }
}

/** What was lent to one plugin, to recognise a refreshed login when it comes back. */
export interface Loan {
  pluginDir: string;
  owner?: Owner;
  lent: string;
}

export class CredentialStore {
  /** Reads and writes of the store one at a time, so concurrent tasks never interleave them. */
  private readonly lock = new SerialLock();

  constructor(private readonly dir: string) {}

  private get file(): string {
    return join(this.dir, CREDENTIALS_FILE);
  }

  /** Copies the login into the plugin's `.claude/`, owned by the plugin's user, mode 600. */
  lend(pluginDir: string, owner: Owner | undefined): Promise<Loan> {
    return this.lock.run(async () => {
      const lent = (await this.readStore()).text;
      const claudeDir = await openClaudeDir(pluginDir, owner, true);
      if (!claudeDir) throw new CredentialsError("the plugin's .claude directory could not be made");
      try {
        await writeFileAtomic(entryOf(claudeDir, CREDENTIALS_FILE), lent, owner, 0o600);
      } finally {
        await claudeDir.close();
      }
      return { pluginDir, ...(owner ? { owner } : {}), lent };
    });
  }

  /**
   * Takes the login back out of the plugin directory, keeping a refreshed one. Also used at
   * start-up for tasks a restart cut off (`lent` unknown). Returns notes for the task's result.
   */
  reclaim(pluginDir: string, owner: Owner | undefined, lent?: string): Promise<string[]> {
    return this.lock.run(async () => {
      let claudeDir: FileHandle | undefined;
      try {
        claudeDir = await openClaudeDir(pluginDir, owner, false);
      } catch (error) {
        if (!(error instanceof CredentialsError)) throw error;
        return [`The login was not copied back: ${error.message}`];
      }
      if (!claudeDir) return [];
      try {
        const path = entryOf(claudeDir, CREDENTIALS_FILE);
        // A regular file of the plugin's own with a single link (never a hard link to someone else's).
        const returned = await readFileNoFollow(path, MAX_BYTES, owner).then(
          (data) => data.toString("utf8"),
          () => undefined,
        );
        await unlink(path).catch(() => undefined);
        if (returned !== undefined && returned !== lent) await this.keepIfNewer(returned);
        return [];
      } finally {
        await claudeDir.close();
      }
    });
  }

  /** A refreshed login replaces the stored one unless it is not a login or expires sooner. */
  private async keepIfNewer(returned: string): Promise<void> {
    const fresh = expiry(returned);
    if (fresh === undefined) return;
    const stored = await this.readStore().catch(() => undefined);
    const current = stored ? expiry(stored.text) : undefined;
    if (current !== undefined && current > fresh) return;
    await writeFileAtomic(this.file, returned, stored?.owner, 0o600);
  }

  private async readStore(): Promise<{ text: string; owner: Owner }> {
    const info = await lstat(this.dir).catch(() => undefined);
    if (!info) throw missing(this.dir);
    if (info.isSymbolicLink()) {
      throw new CredentialsError(
        `the credentials directory ${this.dir} is a symlink; the coder refuses to use it`,
      );
    }
    if (!info.isDirectory()) throw new CredentialsError(`${this.dir} is not a directory`);
    let handle: FileHandle;
    try {
      handle = await open(this.file, O_READ);
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      if (code === "ELOOP") {
        throw new CredentialsError(`${this.file} is a symlink; the coder refuses to use it`);
      }
      if (code === "ENOENT") throw missing(this.dir);
      throw error;
    }
    try {
      const stat = await handle.stat();
      if (!stat.isFile()) throw new CredentialsError(`${this.file} is not a regular file`);
      if (stat.size > MAX_BYTES) throw new CredentialsError(`${this.file} is too large to be a login`);
      return { text: await handle.readFile("utf8"), owner: { uid: stat.uid, gid: stat.gid } };
    } finally {
      await handle.close();
    }
  }
}

function missing(dir: string): CredentialsError {
  return new CredentialsError(
    `no Claude login found (${join(dir, CREDENTIALS_FILE)} is missing). Log in with the Claude Code CLI ` +
      "(`claude`, then /login) and copy ~/.claude/.credentials.json there, or give the coder ANTHROPIC_API_KEY",
  );
}

/**
 * Opens the plugin's `.claude` directory without following a symlink at the plugin directory or
 * at `.claude` (creating it, mode 700 and the plugin user's, when `create`). Undefined when it is
 * absent and not to be created.
 */
async function openClaudeDir(
  pluginDir: string,
  owner: Owner | undefined,
  create: boolean,
): Promise<FileHandle | undefined> {
  const plugin = await openDir(pluginDir, "the plugin directory is a symlink");
  try {
    const path = entryOf(plugin, ".claude");
    const info = await lstat(path).catch(() => undefined);
    if (info?.isSymbolicLink()) throw new CredentialsError("the plugin's .claude directory is a symlink");
    if (info && !info.isDirectory()) throw new CredentialsError("the plugin's .claude is not a directory");
    if (!info) {
      if (!create) return undefined;
      await mkdir(path, { mode: 0o700 });
    }
    const dir = await openDir(path, "the plugin's .claude directory is a symlink");
    const stat = await dir.stat();
    if (owner && (stat.uid !== owner.uid || stat.gid !== owner.gid)) await dir.chown(owner.uid, owner.gid);
    return dir;
  } finally {
    await plugin.close();
  }
}

async function openDir(path: string, symlinkMessage: string): Promise<FileHandle> {
  try {
    return await openDirNoFollow(path);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === "ELOOP" || code === "ENOTDIR") throw new CredentialsError(symlinkMessage);
    throw error;
  }
}

/**
 * When a login expires (`claudeAiOauth.expiresAt`, milliseconds), or 0 for a JSON object without
 * one; undefined for anything that is not a JSON object (never stored).
 */
export function expiry(text: string): number | undefined {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return undefined;
  }
  if (!value || typeof value !== "object" || Array.isArray(value)) return undefined;
  const oauth = (value as { claudeAiOauth?: { expiresAt?: unknown } }).claudeAiOauth;
  return typeof oauth?.expiresAt === "number" ? oauth.expiresAt : 0;
}

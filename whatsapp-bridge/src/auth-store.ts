import { mkdir, readFile, readdir, rm } from "node:fs/promises";
import { join } from "node:path";
import { writeFileAtomic } from "@stavrobot/common";

/**
 * The session's files: `creds.json` (the device's identity) and one file per Signal-protocol key.
 * Every write replaces its file atomically (a crash never leaves half a file), and `creds.json`'s
 * previous version is kept as `creds.json.bak`: a credentials file that does not parse is read
 * from the backup, so one bad write does not unlink the device.
 *
 * Serialising Baileys' values (Buffers inside) is the caller's: `encode`/`decode` are Baileys'
 * `BufferJSON` replacer and reviver.
 */
export class AuthFiles {
  constructor(
    readonly dir: string,
    private readonly encode: (value: unknown) => string,
    private readonly decode: (text: string) => unknown,
  ) {}

  async prepare(): Promise<void> {
    await mkdir(this.dir, { recursive: true, mode: 0o700 });
    for (const name of await readdir(this.dir)) {
      if (name.startsWith(".tmp-")) await rm(join(this.dir, name), { force: true });
    }
  }

  /** The credentials, from `creds.json` or else its backup; undefined when there are none. */
  async readCreds(): Promise<unknown> {
    for (const name of ["creds.json", "creds.json.bak"]) {
      const value = await this.readFile(name);
      if (value !== undefined) return value;
    }
    return undefined;
  }

  async writeCreds(creds: unknown): Promise<void> {
    const path = join(this.dir, "creds.json");
    // The version that parsed last time becomes the backup before it is replaced.
    const previous = await readFile(path, "utf8").catch(() => undefined);
    if (previous !== undefined && this.parses(previous)) {
      await writeFileAtomic(join(this.dir, "creds.json.bak"), previous);
    }
    await writeFileAtomic(path, this.encode(creds));
  }

  async readKey(type: string, id: string): Promise<unknown> {
    return this.readFile(keyFileName(type, id));
  }

  /** Writes a key, or deletes it when `value` is null or undefined. */
  async writeKey(type: string, id: string, value: unknown): Promise<void> {
    const name = keyFileName(type, id);
    if (value === null || value === undefined) await rm(join(this.dir, name), { force: true });
    else await writeFileAtomic(join(this.dir, name), this.encode(value));
  }

  /** Forgets the session (unlinking, or after the phone logged this device out). */
  async clear(): Promise<void> {
    await rm(this.dir, { recursive: true, force: true });
    await this.prepare();
  }

  private parses(text: string): boolean {
    try {
      this.decode(text);
      return true;
    } catch {
      return false;
    }
  }

  private async readFile(name: string): Promise<unknown> {
    let text: string;
    try {
      text = await readFile(join(this.dir, name), "utf8");
    } catch {
      return undefined;
    }
    try {
      return this.decode(text);
    } catch {
      return undefined;
    }
  }
}

/** A key's file name: its type and id with anything but safe characters replaced. */
export function keyFileName(type: string, id: string): string {
  return `${type}-${id}.json`.replace(/[^A-Za-z0-9._-]/g, "_");
}

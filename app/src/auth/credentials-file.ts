import { mkdir, readFile } from "node:fs/promises";
import { dirname } from "node:path";
import type { OAuthCredentials } from "@mariozechner/pi-ai/oauth";
import { SerialLock, writeFileAtomic } from "@stavrobot/common";

/** Every provider's credentials, as pi-ai's CLI writes them: `{"anthropic": {access, refresh, expires}}`. */
export type CredentialsByProvider = Record<string, OAuthCredentials>;

/** The file's content is not what a credentials file holds. */
export class CredentialsFileError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "CredentialsFileError";
  }
}

export function isCredentials(value: unknown): value is OAuthCredentials {
  if (value === null || typeof value !== "object") return false;
  const entry = value as Record<string, unknown>;
  return (
    typeof entry.access === "string" && typeof entry.refresh === "string" && typeof entry.expires === "number"
  );
}

/**
 * The `authFile` of config.toml. Reads never cache (a login, a refresh or pi-ai's own CLI may have
 * written it since); every change is a read-modify-write under one lock, written atomically with
 * mode 600. A missing file holds nothing and is created by the first change.
 */
export class CredentialsFile {
  private readonly lock = new SerialLock();

  constructor(readonly path: string) {}

  /** The whole file; `{}` when it does not exist. Throws CredentialsFileError when it is not a JSON object. */
  async readAll(): Promise<CredentialsByProvider> {
    let text: string;
    try {
      text = await readFile(this.path, "utf8");
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === "ENOENT") return {};
      throw error;
    }
    if (text.trim() === "") return {};
    let parsed: unknown;
    try {
      parsed = JSON.parse(text);
    } catch {
      throw new CredentialsFileError(`${this.path} is not valid JSON`);
    }
    if (parsed === null || typeof parsed !== "object" || Array.isArray(parsed)) {
      throw new CredentialsFileError(`${this.path} must hold a JSON object keyed by provider`);
    }
    return parsed as CredentialsByProvider;
  }

  /** One provider's credentials, or undefined when there are none (a malformed entry counts as none). */
  async get(provider: string): Promise<OAuthCredentials | undefined> {
    const entry = (await this.readAll())[provider];
    if (entry === undefined) return undefined;
    if (!isCredentials(entry)) {
      throw new CredentialsFileError(
        `the "${provider}" entry of ${this.path} lacks access, refresh or expires`,
      );
    }
    return entry;
  }

  /**
   * Changes one provider's entry: `change` gets what is stored now and returns the new entry,
   * `null` to remove it, or `undefined` to leave the file alone. Resolves with what `change` returned.
   */
  update(
    provider: string,
    change: (current: OAuthCredentials | undefined) => OAuthCredentials | null | undefined,
  ): Promise<OAuthCredentials | null | undefined> {
    return this.lock.run(async () => {
      const all = await this.readAll();
      const current = all[provider];
      const next = change(isCredentials(current) ? current : undefined);
      if (next === undefined) return undefined;
      if (next === null) delete all[provider];
      else all[provider] = next;
      await mkdir(dirname(this.path), { recursive: true, mode: 0o700 });
      await writeFileAtomic(this.path, `${JSON.stringify(all, null, 2)}\n`);
      return next;
    });
  }
}

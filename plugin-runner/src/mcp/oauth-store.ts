import { readFileSync } from "node:fs";
import { rename, writeFile } from "node:fs/promises";
import type { OAuthDiscoveryState } from "@modelcontextprotocol/sdk/client/auth.js";
import type { OAuthClientInformationMixed, OAuthTokens } from "@modelcontextprotocol/sdk/shared/auth.js";
import type { Logger } from "@stavrobot/common";

/** What the runner keeps of one server's OAuth sign-in (all of it secret). */
export interface OAuthRecord {
  /** The app's callback the client was registered with (the last Connect's). */
  redirectUrl?: string;
  /** The client: registered dynamically, or the owner's as the authorization server knows it. */
  client?: OAuthClientInformationMixed;
  /** `expires_at`: when the access token expires (ms since the epoch), from its `expires_in`. */
  tokens?: OAuthTokens & { expires_at?: number };
  discovery?: OAuthDiscoveryState;
  /** A Connect under way: the `state` the callback must bring back and the PKCE verifier. */
  pending?: { state: string; verifier: string; at: number };
  /** Why the owner must sign in again (no sign-in yet, a refresh refused, a 401 after refresh). */
  lapsed?: string;
}

/**
 * The OAuth records of every MCP server, in one JSON file of the runner's private state (mode
 * 0600, written whole and renamed, in order). Tokens leave this file only as the `Authorization`
 * header of requests to their server and the refresh sent to their authorization server.
 */
export class OAuthStore {
  private records: Record<string, OAuthRecord>;
  private writing: Promise<void> = Promise.resolve();

  constructor(
    private readonly file: string | undefined,
    private readonly logger: Logger,
  ) {
    this.records = file ? readRecords(file, logger) : {};
  }

  get(name: string): OAuthRecord {
    return this.records[name] ?? {};
  }

  /** Every server's record (to find the Connect a callback's `state` belongs to). */
  entries(): [string, OAuthRecord][] {
    return Object.entries(this.records);
  }

  async update(name: string, change: (record: OAuthRecord) => OAuthRecord): Promise<OAuthRecord> {
    const next = change({ ...this.get(name) });
    this.records = { ...this.records, [name]: next };
    await this.save();
    return next;
  }

  private save(): Promise<void> {
    const { file } = this;
    if (!file) return Promise.resolve();
    const text = JSON.stringify(this.records);
    this.writing = this.writing
      .catch(() => {})
      .then(async () => {
        await writeFile(`${file}.tmp`, text, { mode: 0o600 });
        await rename(`${file}.tmp`, file);
      });
    return this.writing;
  }
}

function readRecords(file: string, logger: Logger): Record<string, OAuthRecord> {
  let text: string;
  try {
    text = readFileSync(file, "utf8");
  } catch {
    return {};
  }
  try {
    const parsed: unknown = JSON.parse(text);
    if (parsed && typeof parsed === "object" && !Array.isArray(parsed))
      return parsed as Record<string, OAuthRecord>;
  } catch {
    // Told below; never its contents.
  }
  logger.error("the MCP servers' OAuth file is not valid; every OAuth server must be signed in again");
  return {};
}

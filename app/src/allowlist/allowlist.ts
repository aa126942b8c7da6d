import { createHmac, timingSafeEqual } from "node:crypto";
import type { Logger } from "@stavrobot/common";
import type { Channel } from "../audience.js";
import { addressMatches } from "../channels/email/address.js";
import type { Database } from "../db/database.js";

/** The services an allowlist is kept for (the reference's four; this product talks on two). */
export const ALLOWLIST_SERVICES = ["signal", "telegram", "whatsapp", "email"] as const;
export type AllowlistService = (typeof ALLOWLIST_SERVICES)[number];

/** The lists as stored: identifiers as strings ("*" allows anyone), notes keyed by identifier. */
export interface AllowlistLists {
  signal: string[];
  telegram: string[];
  whatsapp: string[];
  email: string[];
  notes: Record<string, string>;
}

/** The owner's own identities, from `[owner]` in config.toml: always allowed, never removable. */
export type OwnerIdentities = Record<AllowlistService, string[]>;

interface Row {
  service: string;
  identifier: string;
  note: string | null;
  signature: string;
}

/**
 * Who besides the owner may talk to the assistant, per channel, and whom the send tools may reach.
 * Entries live in the database, where the owner's settings page writes them. The model can run any
 * SQL, so every entry carries an HMAC keyed by a secret the model never sees: a row it inserts
 * itself has no valid signature and is ignored (and logged), so the agent cannot widen the list.
 */
export class Allowlist {
  private readonly key: Buffer;

  constructor(
    private readonly db: Database,
    secret: string,
    readonly owner: OwnerIdentities,
    private readonly logger: Logger,
    /** The channels configured in config.toml: the only lists the settings page shows. */
    readonly channels: readonly Channel[] = [],
    /** How identifiers compare, per service (the channels say; `channels/registry.ts`). */
    private readonly normalize: (service: AllowlistService, identifier: string) => string = (_service, id) =>
      id.trim(),
  ) {
    this.key = createHmac("sha256", secret).update("stavrobot allowlist v1").digest();
  }

  /** The stored lists, valid entries only, with the owner's identities always in. */
  async lists(): Promise<AllowlistLists> {
    const lists: AllowlistLists = { signal: [], telegram: [], whatsapp: [], email: [], notes: {} };
    for (const row of await this.rows()) {
      const service = row.service as AllowlistService;
      if (!lists[service].includes(row.identifier)) lists[service].push(row.identifier);
      if (row.note) lists.notes[row.identifier] = row.note;
    }
    for (const service of ALLOWLIST_SERVICES) {
      for (const id of this.owner[service]) if (!lists[service].includes(id)) lists[service].unshift(id);
    }
    return lists;
  }

  /** Whether `identifier` may talk on `service` (the owner always may; "*" lets anyone). */
  async isAllowed(service: AllowlistService, identifier: string): Promise<boolean> {
    const id = this.normalize(service, identifier);
    if (this.isOwner(service, id)) return true;
    // Email entries may be patterns (`*@example.com`): each is matched, a star never crossing the `@`.
    if (service === "email") {
      const result = await this.db.query<Row>(
        "SELECT service, identifier, note, signature FROM allowlist WHERE service = 'email'",
      );
      return result.rows.some((row) => addressMatches(row.identifier, id) && this.verify(row));
    }
    const result = await this.db.query<Row>(
      "SELECT service, identifier, note, signature FROM allowlist WHERE service = $1 AND identifier IN ($2, '*')",
      [service, id],
    );
    return result.rows.some((row) => this.verify(row));
  }

  /** Whether this is one of the owner's own identities. */
  isOwner(service: AllowlistService, identifier: string): boolean {
    const id = this.normalize(service, identifier);
    if (service === "email") return this.owner.email.some((pattern) => addressMatches(pattern, id));
    return this.owner[service].includes(id);
  }

  /** Replaces every list (the settings page saves them all at once). The owner's ids are not stored. */
  async replace(lists: AllowlistLists): Promise<void> {
    const values: string[][] = [];
    for (const service of ALLOWLIST_SERVICES) {
      for (const identifier of lists[service]) {
        if (this.owner[service].includes(identifier)) continue;
        values.push([service, identifier, lists.notes[identifier] ?? "", this.sign(service, identifier)]);
      }
    }
    await this.db.transaction(async (tx) => {
      await tx.query("DELETE FROM allowlist");
      for (const [service, identifier, note, signature] of values) {
        await tx.query(
          "INSERT INTO allowlist (service, identifier, note, signature) VALUES ($1, $2, NULLIF($3, ''), $4)",
          [service, identifier, note, signature],
        );
      }
    });
  }

  /**
   * The legacy config lists (`[telegram] allowedChatIds`, `[signal] allowedNumbers`) are copied into
   * the stored allowlist once; after that the settings page owns it.
   */
  async importLegacyOnce(legacy: Partial<Record<AllowlistService, string[]>>): Promise<number> {
    const done = await this.db.query("SELECT 1 FROM app_state WHERE key = 'allowlist_legacy_imported'");
    if (done.rows.length > 0) return 0;
    const lists = await this.lists();
    let added = 0;
    for (const service of ALLOWLIST_SERVICES) {
      for (const raw of legacy[service] ?? []) {
        const id = this.normalize(service, String(raw));
        if (!lists[service].includes(id)) {
          lists[service].push(id);
          added++;
        }
      }
    }
    if (added > 0) await this.replace(lists);
    await this.db.query(
      "INSERT INTO app_state (key, value) VALUES ('allowlist_legacy_imported', 'true') ON CONFLICT (key) DO NOTHING",
    );
    return added;
  }

  private async rows(): Promise<Row[]> {
    const result = await this.db.query<Row>(
      "SELECT service, identifier, note, signature FROM allowlist ORDER BY created_at, identifier",
    );
    const valid: Row[] = [];
    for (const row of result.rows) {
      if (!(ALLOWLIST_SERVICES as readonly string[]).includes(row.service)) continue;
      if (this.verify(row)) valid.push(row);
    }
    return valid;
  }

  private sign(service: string, identifier: string): string {
    return createHmac("sha256", this.key).update(`${service}\n${identifier}`).digest("hex");
  }

  private verify(row: Row): boolean {
    const expected = Buffer.from(this.sign(row.service, row.identifier), "hex");
    const given = Buffer.from(row.signature ?? "", "hex");
    const ok = given.length === expected.length && timingSafeEqual(given, expected);
    if (!ok) {
      this.logger.warn("ignoring an allowlist entry that the settings page did not write", {
        service: row.service,
        identifier: row.identifier,
      });
    }
    return ok;
  }
}

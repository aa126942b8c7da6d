import { createHmac, timingSafeEqual } from "node:crypto";
import { rm } from "node:fs/promises";
import { join } from "node:path";
import { DomainError } from "@stavrobot/common";
import type { Queryable } from "../db/database.js";
import { hashFiles, readSkillDir, writeSkillDir, type SkillFiles } from "./files.js";
import { SKILL_NAME, type ParsedSkill } from "./parse.js";

/**
 * `approved`: shown to the model. `pending`: never approved (or its approval does not hold).
 * `changed`: its content is not what the owner approved. `disabled`: approved, switched off.
 */
export type SkillStatus = "approved" | "pending" | "changed" | "disabled";

export interface SkillRecord {
  name: string;
  description: string;
  format: ParsedSkill["format"];
  source: string;
  version: string | null;
  author: string | null;
  contentHash: string;
  installedAt: Date;
  updatedAt: Date;
  approvedVersion: string | null;
  approvedAt: Date | null;
  enabled: boolean;
  status: SkillStatus;
}

interface Row {
  name: string;
  description: string;
  format: ParsedSkill["format"];
  source: string;
  version: string | null;
  author: string | null;
  content_hash: string;
  installed_at: Date;
  updated_at: Date;
  approved_hash: string | null;
  approved_version: string | null;
  approved_at: Date | null;
  enabled: boolean;
  signature: string;
}

/** A skill ready to be stored: its parsed main text and every file, `SKILL.md` among them. */
export interface SkillPackage {
  parsed: ParsedSkill;
  files: SkillFiles;
}

export interface InstallOutcome {
  name: string;
  /** It replaced an installed skill of the same name and source. */
  updated: boolean;
  /** Its content is what was installed already (nothing to approve again). */
  unchanged: boolean;
  status: SkillStatus;
}

/**
 * The installed skills: their files in `dir/<name>/`, their records in `installed_skills`. Only
 * the owner's paths (the settings routes) approve, enable or disable, and each signs the row with
 * a key the model never sees; `install` (which the model may call) never touches the approval, so
 * a new or changed skill waits for the owner.
 */
export class SkillStore {
  private readonly key: Buffer;

  constructor(
    private readonly db: Queryable,
    readonly dir: string,
    secret: string,
  ) {
    this.key = createHmac("sha256", secret).update("stavrobot skills v1").digest();
  }

  async install(pkg: SkillPackage, source: string): Promise<InstallOutcome> {
    const { parsed, files } = pkg;
    const hash = hashFiles(files);
    const existing = await this.row(parsed.name);
    if (existing && existing.source !== source) {
      throw new DomainError(
        "conflict",
        `A skill named "${parsed.name}" is already installed from ${existing.source}; remove it first.`,
      );
    }
    if (existing?.content_hash === hash && existing.description === parsed.description) {
      return { name: parsed.name, updated: false, unchanged: true, status: this.status(existing) };
    }
    await writeSkillDir(this.folder(parsed.name), files);
    await this.db.query(
      `INSERT INTO installed_skills (name, description, format, source, version, author, content_hash)
       VALUES ($1, $2, $3, $4, $5, $6, $7)
       ON CONFLICT (name) DO UPDATE SET description = $2, format = $3, version = $5, author = $6,
         content_hash = $7, updated_at = now()`,
      [
        parsed.name,
        parsed.description,
        parsed.format,
        source,
        parsed.version ?? null,
        parsed.author ?? null,
        hash,
      ],
    );
    const row = (await this.row(parsed.name)) as Row;
    return { name: parsed.name, updated: existing !== undefined, unchanged: false, status: this.status(row) };
  }

  async list(): Promise<SkillRecord[]> {
    const result = await this.db.query<Row>("SELECT * FROM installed_skills ORDER BY name");
    return result.rows.map((row) => this.record(row));
  }

  async get(name: string): Promise<SkillRecord | undefined> {
    const row = await this.row(name);
    return row && this.record(row);
  }

  /** The skills the model may see, in name order. */
  async approved(): Promise<SkillRecord[]> {
    return (await this.list()).filter((skill) => skill.status === "approved");
  }

  /**
   * A skill's files as they are on disk, checked against what the owner approved: for the model
   * (`forModel`), only an approved skill whose files still hash to the approved hash; for the
   * owner, any installed skill.
   */
  async files(name: string, forModel: boolean): Promise<{ record: SkillRecord; files: SkillFiles }> {
    const row = await this.row(name);
    if (!row) throw new DomainError("not-found", `No skill named "${name.slice(0, 80)}" is installed.`);
    const record = this.record(row);
    if (forModel && record.status !== "approved") {
      throw new DomainError(
        "forbidden",
        record.status === "disabled"
          ? `The skill "${name}" is disabled by the owner.`
          : `The skill "${name}" waits for the owner's approval (on the Skills page); it cannot be read until then.`,
      );
    }
    const files = await readSkillDir(this.folder(name)).catch(() => undefined);
    if (!files)
      throw new DomainError("not-found", `The files of skill "${name}" are missing; install it again.`);
    if (forModel && hashFiles(files) !== row.approved_hash) {
      throw new DomainError(
        "forbidden",
        `The files of skill "${name}" are not what the owner approved; it waits for their approval again.`,
      );
    }
    return { record, files };
  }

  /** The owner approves what is installed now (`hash`, when given, must be it: what they saw). */
  async approve(name: string, hash?: string): Promise<SkillRecord> {
    const row = await this.required(name);
    if (hash !== undefined && hash !== row.content_hash)
      throw new DomainError("conflict", `The skill "${name}" changed since it was shown; look at it again.`);
    // What is on disk is what is approved (not only what the row says).
    const files = await readSkillDir(this.folder(name)).catch(() => undefined);
    if (!files || hashFiles(files) !== row.content_hash)
      throw new DomainError(
        "conflict",
        `The files of skill "${name}" are missing or changed; install it again.`,
      );
    await this.db.query(
      `UPDATE installed_skills SET approved_hash = content_hash, approved_version = version,
         approved_at = now(), enabled = true, signature = $2 WHERE name = $1`,
      [name, this.sign(name, row.content_hash, row.description, true)],
    );
    return this.record(await this.required(name));
  }

  /** The owner switches an approved skill off or on again (on again keeps the approval's hash). */
  async setEnabled(name: string, enabled: boolean): Promise<SkillRecord> {
    const row = await this.required(name);
    if (enabled && this.record(row).status !== "disabled")
      throw new DomainError("invalid", `The skill "${name}" is not disabled; approve it instead.`);
    await this.db.query("UPDATE installed_skills SET enabled = $2, signature = $3 WHERE name = $1", [
      name,
      enabled,
      row.approved_hash ? this.sign(name, row.approved_hash, row.description, enabled) : "",
    ]);
    return this.record(await this.required(name));
  }

  async remove(name: string): Promise<void> {
    await this.required(name);
    await rm(this.folder(name), { recursive: true, force: true });
    await this.db.query("DELETE FROM installed_skills WHERE name = $1", [name]);
  }

  private folder(name: string): string {
    if (!SKILL_NAME.test(name))
      throw new DomainError("invalid", "A skill's name is lower-case letters, digits and hyphens.");
    return join(this.dir, name);
  }

  private async row(name: string): Promise<Row | undefined> {
    const result = await this.db.query<Row>("SELECT * FROM installed_skills WHERE name = $1", [name]);
    return result.rows[0];
  }

  private async required(name: string): Promise<Row> {
    const row = await this.row(name);
    if (!row) throw new DomainError("not-found", `No skill named "${name.slice(0, 80)}" is installed.`);
    return row;
  }

  private sign(name: string, hash: string, description: string, enabled: boolean): string {
    return createHmac("sha256", this.key)
      .update(JSON.stringify([name, hash, description, enabled]))
      .digest("hex");
  }

  private status(row: Row): SkillStatus {
    if (!row.approved_hash) return "pending";
    if (row.approved_hash !== row.content_hash) return "changed";
    const expected = Buffer.from(this.sign(row.name, row.approved_hash, row.description, row.enabled));
    const actual = Buffer.from(row.signature);
    if (actual.length !== expected.length || !timingSafeEqual(actual, expected)) return "pending";
    return row.enabled ? "approved" : "disabled";
  }

  private record(row: Row): SkillRecord {
    return {
      name: row.name,
      description: row.description,
      format: row.format,
      source: row.source,
      version: row.version,
      author: row.author,
      contentHash: row.content_hash,
      installedAt: row.installed_at,
      updatedAt: row.updated_at,
      approvedVersion: row.approved_version,
      approvedAt: row.approved_at,
      enabled: row.enabled,
      status: this.status(row),
    };
  }
}

import { spawnSync } from "node:child_process";
import { existsSync } from "node:fs";
import { mkdir, mkdtemp, readdir, rm, stat, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { gzipSync } from "node:zlib";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { BackupError, backupEmbedded, restoreEmbedded } from "../src/db/backup.js";
import { BACKUP_NAME, backupName, backupsToDelete } from "../src/db/backup-retention.js";
import { openPostgres, type Database } from "../src/db/database.js";
import { openPglite } from "../src/db/pglite.js";
import { migrate } from "../src/db/migrations.js";
import { createTestDatabase, type TestDatabase } from "./helpers/db.js";
import { repoRoot } from "./helpers/process.js";

/** Runs one of scripts/*.sh with extra environment variables (and optional stdin). */
function runScript(name: string, args: string[], env: Record<string, string>, input?: string) {
  const result = spawnSync(join(repoRoot, "scripts", name), args, {
    env: { ...process.env, ...env },
    input,
    encoding: "utf8",
  });
  if (result.error) throw result.error;
  return result;
}

/** The shell twin of backupsToDelete(). */
function shellToDelete(names: string[], now: Date): string[] {
  const result = runScript(
    "backup-retention.sh",
    [],
    { BACKUP_NOW: isoSeconds(now) },
    names.join("\n") + "\n",
  );
  expect(result.stderr).toBe("");
  expect(result.status).toBe(0);
  return result.stdout.split("\n").filter(Boolean);
}

function isoSeconds(date: Date): string {
  return date.toISOString().slice(0, 19) + "Z";
}

/** One `.sql.gz` backup a day at 02:30 UTC, `from` to `to` inclusive (YYYY-MM-DD). */
function daily(from: string, to: string): string[] {
  const names: string[] = [];
  for (let day = new Date(`${from}T02:30:00Z`); day <= new Date(`${to}T02:30:00Z`);) {
    names.push(backupName(day, "sql.gz"));
    day = new Date(day.getTime() + 86_400_000);
  }
  return names;
}

describe("backup retention over a simulated calendar", () => {
  const now = new Date("2025-12-31T12:00:00Z");
  const hourly = Array.from({ length: 24 }, (_, hour) =>
    backupName(new Date(Date.UTC(2025, 11, 30, hour, 15)), "sql.gz"),
  );
  const ignored = [
    "notes.txt",
    ".stavrobot-2025-12-31T02-30-00Z.sql.gz.partial",
    "stavrobot-2024-13-01T00-00-00Z.sql.gz",
    "stavrobot-2024-01-01T00-00-00.sql.gz",
  ];
  const calendar = [
    ...daily("2023-01-01", "2025-12-31"),
    ...hourly,
    "stavrobot-2019-06-15T08-00-00Z.sql.gz",
    "stavrobot-2022-02-01T00-00-00Z.pglite.tar.gz",
    "stavrobot-2022-03-01T00-00-00Z.pglite.tar.gz",
    ...ignored,
  ];
  const monthEnds = [
    "01-31",
    "02-28",
    "03-31",
    "04-30",
    "05-31",
    "06-30",
    "07-31",
    "08-31",
    "09-30",
    "10-31",
    "11-30",
  ];
  const expectedKept = [
    // The 30 newest: all 24 hourly ones and the daily ones of 26–31 December.
    ...hourly,
    ...daily("2025-12-26", "2025-12-31"),
    // The newest of each of the last 12 months (December is among the newest already).
    ...monthEnds.map((day) => `stavrobot-2025-${day}T02-30-00Z.sql.gz`),
    // The newest of every year, whatever its kind.
    "stavrobot-2024-12-31T02-30-00Z.sql.gz",
    "stavrobot-2023-12-31T02-30-00Z.sql.gz",
    "stavrobot-2022-03-01T00-00-00Z.pglite.tar.gz",
    "stavrobot-2019-06-15T08-00-00Z.sql.gz",
    // Not backups: never touched.
    ...ignored,
  ];

  it("keeps exactly the 30 newest, one per month for 12 months and one per year (TypeScript)", () => {
    const doomed = backupsToDelete(calendar, now);
    const kept = calendar.filter((name) => !doomed.includes(name));
    expect(kept.sort()).toEqual([...expectedKept].sort());
    expect(doomed).toEqual([...doomed].sort((a, b) => a.slice(10, 29).localeCompare(b.slice(10, 29))));
    expect(doomed[0]).toBe("stavrobot-2022-02-01T00-00-00Z.pglite.tar.gz");
  });

  it("scripts/backup-retention.sh prints the same names, in the same order", () => {
    expect(shellToDelete(calendar, now)).toEqual(backupsToDelete(calendar, now));
  });

  it("agrees with the TypeScript rule at other moments, including month and year boundaries", () => {
    for (const at of [
      "2026-06-15T00:00:00Z",
      "2025-01-01T00:00:00Z",
      "2024-02-29T23:59:59Z",
      "2031-01-01T00:00:00Z",
    ]) {
      const moment = new Date(at);
      expect(shellToDelete(calendar, moment), at).toEqual(backupsToDelete(calendar, moment));
    }
    // Half a year on, January–June 2025 have left the 12-month window; July 2025 has not.
    const later = backupsToDelete(calendar, new Date("2026-06-15T00:00:00Z"));
    expect(later).toContain("stavrobot-2025-06-30T02-30-00Z.sql.gz");
    expect(later).not.toContain("stavrobot-2025-07-31T02-30-00Z.sql.gz");
  });

  it("run daily for three years, ends with the same set as applying the rule once", () => {
    let present: string[] = [];
    const names = daily("2023-01-01", "2025-12-31");
    for (const name of names) {
      present.push(name);
      const at = new Date(`${name.slice(10, 20)}T02:30:00Z`);
      const doomed = new Set(backupsToDelete(present, at));
      present = present.filter((kept) => !doomed.has(kept));
      expect(present.length).toBeLessThanOrEqual(30 + 11 + 3);
    }
    const once = backupsToDelete(names, now);
    expect(present).toEqual(names.filter((name) => !once.includes(name)));
    expect(present).toHaveLength(30 + 11 + 2);
  });

  it("reads a directory, and rejects a malformed BACKUP_NOW", async () => {
    const dir = await mkdtemp(join(tmpdir(), "stavrobot-retention-"));
    try {
      const names = [...daily("2025-01-01", "2025-03-10"), "README.txt"];
      await Promise.all(names.map((name) => writeFile(join(dir, name), "")));
      await mkdir(join(dir, "stavrobot-2020-01-01T00-00-00Z.sql.gz"));
      const result = runScript("backup-retention.sh", [dir], { BACKUP_NOW: "2025-03-10T12:00:00Z" });
      expect(result.status).toBe(0);
      const expected = backupsToDelete(names, new Date("2025-03-10T12:00:00Z"));
      expect(expected.length).toBeGreaterThan(0);
      expect(result.stdout.split("\n").filter(Boolean)).toEqual(expected);

      const bad = runScript("backup-retention.sh", [dir], { BACKUP_NOW: "2025-03-10 12:00" });
      expect(bad.status).toBe(2);
      expect(bad.stderr).toContain("BACKUP_NOW");
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});

/** Rows no backup tool should mangle: unicode, quotes, backslashes, COPY's \N, bytea, jsonb. */
async function insertDistinctiveRows(db: Database): Promise<void> {
  const tricky = "Grüße, 世界 🌍 — 'single' \"double\" \\backslash \\N\n\tnext line";
  const inbox = await db.query<{ id: number }>(
    `INSERT INTO inbox (source, sender, payload, status, idempotency_key)
     VALUES ('signal', '+44 7700 900123', $1, 'done', 'key-ü') RETURNING id`,
    [JSON.stringify({ message: tricky, nested: { list: [1, "two", null, 3.5], empty: {} } })],
  );
  const inboxId = inbox.rows[0]!.id;
  const message = await db.query<{ id: number }>(
    "INSERT INTO messages (role, content, inbox_id) VALUES ('user', $1, $2) RETURNING id",
    [JSON.stringify({ role: "user", content: [{ type: "text", text: tricky }] }), inboxId],
  );
  await db.query("INSERT INTO memories (content) VALUES ($1), ('second memory')", [tricky]);
  await db.query("INSERT INTO scratchpad (title, body) VALUES ('Ünïcødé', $1)", [tricky]);
  await db.query("INSERT INTO compactions (summary, up_to_message_id) VALUES ($1, $2)", [
    tricky,
    message.rows[0]!.id,
  ]);
  await db.query(`INSERT INTO cron_entries (cron_expression, note) VALUES ('0 9 * * 1', 'weekly ☕')`);
  await db.query(`INSERT INTO cron_entries (fire_at, note) VALUES ('2030-01-02T03:04:05.678Z', 'once')`);
  await db.query(
    "INSERT INTO pages (path, mimetype, data, is_public, queries) VALUES ('/p', 'image/png', $1, true, $2)",
    [new Uint8Array([0, 1, 2, 0x5c, 0x0a, 0x27, 0x80, 0xfe, 0xff]), JSON.stringify({ q: "SELECT 'ü'" })],
  );
}

/** Every table in schema public with all its rows, in key order. */
async function snapshot(db: Database): Promise<Record<string, unknown[]>> {
  const tables = await db.query<{ table_name: string }>(
    `SELECT table_name FROM information_schema.tables
     WHERE table_schema = 'public' AND table_type = 'BASE TABLE' ORDER BY table_name`,
  );
  const result: Record<string, unknown[]> = {};
  for (const { table_name: table } of tables.rows) {
    result[table] = (await db.query(`SELECT * FROM "${table}" ORDER BY 1`)).rows;
  }
  return result;
}

/** A snapshot must contain the rows inserted above, or comparing two of them proves little. */
function expectFilled(rows: Record<string, unknown[]>): void {
  for (const table of [
    "inbox",
    "messages",
    "memories",
    "scratchpad",
    "compactions",
    "cron_entries",
    "pages",
  ]) {
    expect(rows[table]?.length, table).toBeGreaterThan(0);
  }
  expect(rows.schema_version?.length).toBeGreaterThan(0);
}

/** The next id continues after the restored rows: sequences travel with the backup. */
async function expectSequencesRestored(db: Database, lastId: number): Promise<void> {
  const inserted = await db.query<{ id: number }>(
    "INSERT INTO memories (content) VALUES ('after') RETURNING id",
  );
  expect(inserted.rows[0]!.id).toBe(lastId + 1);
}

function lastMemoryId(rows: Record<string, unknown[]>): number {
  return (rows.memories!.at(-1) as { id: number }).id;
}

describe.runIf(Boolean(process.env.TEST_DATABASE_URL))(
  "server database (TEST_DATABASE_URL): scripts/pg-backup.sh and scripts/pg-restore.sh",
  () => {
    let source: TestDatabase;
    let target: TestDatabase;
    let work: string;
    let before: Record<string, unknown[]>;
    let backupFile: string;
    const url = (database: TestDatabase) => database.env.DATABASE_URL!;

    beforeAll(async () => {
      source = await createTestDatabase();
      target = await createTestDatabase();
      work = await mkdtemp(join(tmpdir(), "stavrobot-pg-backup-"));
    });
    afterAll(async () => {
      await source?.drop();
      await target?.drop();
      if (work) await rm(work, { recursive: true, force: true });
    });

    it("backs up with pg_dump and restores every table's rows exactly", async () => {
      const db = openPostgres(url(source));
      try {
        await migrate(db);
        await insertDistinctiveRows(db);
        before = await snapshot(db);
      } finally {
        await db.close();
      }
      expectFilled(before);

      // 46 old backups from 2020: with the new one, the 17 oldest fall outside the 30 newest.
      const backupDir = join(work, "backups");
      const older = daily("2020-01-01", "2020-02-15");
      await mkdir(backupDir);
      await Promise.all(older.map((name) => writeFile(join(backupDir, name), "")));
      const backup = runScript("pg-backup.sh", ["--once"], {
        DATABASE_URL: url(source),
        BACKUP_DIR: backupDir,
      });
      expect(backup.stderr).toBe("");
      expect(backup.status).toBe(0);
      const files = await readdir(backupDir);
      const created = files.filter((name) => !older.includes(name));
      expect(created).toHaveLength(1);
      expect(created[0]).toMatch(BACKUP_NAME);
      expect(created[0]).toMatch(/\.sql\.gz$/);
      backupFile = join(backupDir, created[0]!);
      expect((await stat(backupFile)).mode & 0o777).toBe(0o600);
      const deleted = daily("2020-01-01", "2020-01-17");
      expect(
        backup.stdout
          .trim()
          .split("\n")
          .map((line) => line.replace(/^\S+ /, "")),
      ).toEqual([
        `pg-backup: wrote ${backupFile} (${(await stat(backupFile)).size} bytes)`,
        ...deleted.map((name) => `pg-backup: deleted old backup ${name}`),
      ]);
      expect(files.sort()).toEqual([...daily("2020-01-18", "2020-02-15"), created[0]!].sort());

      const restore = runScript("pg-restore.sh", [backupFile], { DATABASE_URL: url(target) });
      expect(restore.stderr).toBe("");
      expect(restore.status).toBe(0);
      const restored = openPostgres(url(target));
      try {
        expect(await snapshot(restored)).toEqual(before);
        await expectSequencesRestored(restored, lastMemoryId(before));
      } finally {
        await restored.close();
      }
    });

    it("refuses a non-empty database without --force; a damaged file changes nothing; --force replaces", async () => {
      const refused = runScript("pg-restore.sh", [backupFile], { DATABASE_URL: url(target) });
      expect(refused.status).toBe(1);
      expect(refused.stderr).toMatch(/is not empty.*--force/);

      const damaged = join(work, "damaged.sql.gz");
      await writeFile(damaged, gzipSync("DROP TABLE memories;\nTHIS IS NOT SQL;\n"));
      const failed = runScript("pg-restore.sh", ["--force", damaged], { DATABASE_URL: url(target) });
      expect(failed.status).not.toBe(0);
      const db = openPostgres(url(target));
      try {
        // Still the restored rows plus the 'after' row from the previous test: nothing was dropped.
        const rows = await snapshot(db);
        expect(rows.memories).toHaveLength(before.memories!.length + 1);

        const forced = runScript("pg-restore.sh", ["--force", backupFile], { DATABASE_URL: url(target) });
        expect(forced.stderr).toBe("");
        expect(forced.status).toBe(0);
        expect(await snapshot(db)).toEqual(before);
      } finally {
        await db.close();
      }
    });

    it("leaves no file behind and exits non-zero when pg_dump fails", async () => {
      const backupDir = join(work, "failing");
      const missing = new URL(url(source));
      missing.pathname = "/stavrobot_test_no_such_database";
      const result = runScript("pg-backup.sh", ["--once"], {
        DATABASE_URL: missing.toString(),
        BACKUP_DIR: backupDir,
      });
      expect(result.status).not.toBe(0);
      expect(result.stderr).toContain("backup failed");
      expect(await readdir(backupDir)).toEqual([]);
    });
  },
);

describe("embedded database (PGlite): backupEmbedded and restoreEmbedded", () => {
  let work: string;
  let before: Record<string, unknown[]>;
  let archive: string;
  const now = new Date("2025-06-15T10:20:30Z");

  beforeAll(async () => {
    work = await mkdtemp(join(tmpdir(), "stavrobot-pglite-backup-"));
  });
  afterAll(async () => {
    if (work) await rm(work, { recursive: true, force: true });
  });

  it("backs up the data directory, applies retention and restores every table's rows", async () => {
    const dataDir = join(work, "source");
    const backupDir = join(work, "backups");
    const db = await openPglite(dataDir);
    try {
      await migrate(db);
      await insertDistinctiveRows(db);
      before = await snapshot(db);
      // The database is open in this process: a second opener would corrupt it.
      await expect(backupEmbedded(dataDir, backupDir, now)).rejects.toThrow(/in use.*stop the app/s);
    } finally {
      await db.close();
    }
    expectFilled(before);

    // Older backups: 1 May–4 June. With the new one, the 30 newest reach back to 7 May.
    const older = daily("2025-05-01", "2025-06-04");
    await mkdir(backupDir, { recursive: true });
    await Promise.all(older.map((name) => writeFile(join(backupDir, name), "")));
    archive = await backupEmbedded(dataDir, backupDir, now);
    expect(archive).toBe(join(backupDir, "stavrobot-2025-06-15T10-20-30Z.pglite.tar.gz"));
    expect((await stat(archive)).mode & 0o777).toBe(0o600);
    expect((await readdir(backupDir)).sort()).toEqual(
      [...daily("2025-05-07", "2025-06-04"), "stavrobot-2025-06-15T10-20-30Z.pglite.tar.gz"].sort(),
    );

    const restoredDir = join(work, "restored");
    await restoreEmbedded(archive, restoredDir);
    expect(existsSync(join(restoredDir, "postmaster.pid"))).toBe(false);
    const restored = await openPglite(restoredDir);
    try {
      expect(await snapshot(restored)).toEqual(before);
      await expectSequencesRestored(restored, lastMemoryId(before));
    } finally {
      await restored.close();
    }
  });

  it("refuses to restore over a database without force, or from a file that is not a backup", async () => {
    const restoredDir = join(work, "restored");
    await expect(restoreEmbedded(archive, restoredDir)).rejects.toThrow(BackupError);
    await expect(restoreEmbedded(archive, restoredDir)).rejects.toThrow(/already holds a database.*--force/);

    const damaged = join(work, "damaged.pglite.tar.gz");
    await writeFile(damaged, gzipSync("not a tarball ".repeat(100)));
    await expect(restoreEmbedded(damaged, join(work, "fresh"), { force: true })).rejects.toThrow(
      /not an embedded-database backup/,
    );
    await expect(restoreEmbedded(join(work, "missing.tar.gz"), join(work, "fresh"))).rejects.toThrow(
      /no such file/,
    );
    expect(existsSync(join(work, "fresh"))).toBe(false);
  });

  it("with force, replaces the database and keeps the old directory beside it", async () => {
    const restoredDir = join(work, "restored");
    await restoreEmbedded(archive, restoredDir, { force: true });
    const aside = (await readdir(work)).filter((name) => name.startsWith("restored.replaced-"));
    expect(aside).toHaveLength(1);
    expect(existsSync(join(work, aside[0]!, "PG_VERSION"))).toBe(true);
    expect((await readdir(work)).filter((name) => name.includes(".restoring-"))).toEqual([]);
    const restored = await openPglite(restoredDir);
    try {
      // The 'after' row written by the previous test is gone: this is the backup again.
      expect(await snapshot(restored)).toEqual(before);
    } finally {
      await restored.close();
    }
  });
});

import { existsSync } from "node:fs";
import { mkdir, mkdtemp, readdir, rm, stat, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createLogger, silentLogger } from "@stavrobot/common";
import { restoreEmbedded } from "../src/db/backup.js";
import { backupName, backupsToDelete } from "../src/db/backup-retention.js";
import { BackupSchedule } from "../src/db/backup-schedule.js";
import type { Database } from "../src/db/database.js";
import { backupOpenDatabase } from "../src/db/live-backup.js";
import { migrate } from "../src/db/migrations.js";
import { openPglite } from "../src/db/pglite.js";

// The backup of the embedded database while it is open, in this process (the app's own schedule
// through `npm start` is in backup-running-app.test.ts). Always PGlite: a server has pg-backup.
let work: string;
let db: Database;

beforeAll(async () => {
  work = await mkdtemp(join(tmpdir(), "stavrobot-live-backup-"));
  db = await openPglite(join(work, "data", "pglite"));
  await migrate(db);
  await db.query("CREATE TABLE counter (n int PRIMARY KEY, note text)");
}, 60_000);
afterAll(async () => {
  await db?.close();
  if (work) await rm(work, { recursive: true, force: true });
});

describe("a backup of the open embedded database", () => {
  it("is a consistent image while inserts go on, and restores with every row it holds", async () => {
    let inserted = 0;
    let writing = true;
    const writer = (async () => {
      while (writing) {
        // As requests would, each in a turn of the event loop of its own (PGlite answers in microtasks).
        await new Promise((resolve) => setImmediate(resolve));
        inserted++;
        await db.transaction(async (tx) => {
          await tx.query("INSERT INTO counter (n, note) VALUES ($1, repeat('x', 2000))", [inserted]);
          await tx.query("INSERT INTO memories (content) VALUES ($1)", [`memory ${inserted}`]);
        });
      }
    })();
    while (inserted < 50) await new Promise((resolve) => setTimeout(resolve, 10));
    const backupDir = join(work, "backups");
    const made = await backupOpenDatabase(db.embedded!, backupDir, new Date("2025-06-15T10:20:30Z"));
    const atBackup = inserted;
    // The database went on working during the backup, and after it.
    while (inserted < atBackup + 20) await new Promise((resolve) => setTimeout(resolve, 10));
    writing = false;
    await writer;

    expect(made.path).toBe(join(backupDir, "stavrobot-2025-06-15T10-20-30Z.pglite.tar.gz"));
    expect((await stat(made.path)).mode & 0o777).toBe(0o600);
    expect(made.bytes).toBe((await stat(made.path)).size);
    // Only the archive is left: no copy, no partial file.
    expect(await readdir(backupDir)).toEqual(["stavrobot-2025-06-15T10-20-30Z.pglite.tar.gz"]);

    const restoredDir = join(work, "restored", "pglite");
    await restoreEmbedded(made.path, restoredDir);
    expect(existsSync(join(restoredDir, "postmaster.pid"))).toBe(false);
    const restored = await openPglite(restoredDir);
    try {
      const counted = await restored.query<{ n: number; max: number }>(
        "SELECT count(*)::int AS n, coalesce(max(n), 0) AS max FROM counter",
      );
      const { n, max } = counted.rows[0]!;
      // A prefix of the inserts, whole transactions only: 1..n, and as many memories.
      expect(n).toBeGreaterThanOrEqual(50);
      expect(n).toBeLessThan(inserted);
      expect(max).toBe(n);
      const memories = await restored.query<{ n: number }>(
        "SELECT count(*)::int AS n FROM memories WHERE content LIKE 'memory %'",
      );
      expect(memories.rows[0]!.n).toBe(n);
      // The restored database works: its sequences go on.
      await restored.query("INSERT INTO memories (content) VALUES ('after the restore')");
    } finally {
      await restored.close();
    }
  }, 120_000);

  it("holds what was committed after the first copy, before the pause", async () => {
    const made = await backupOpenDatabase(
      db.embedded!,
      join(work, "late"),
      new Date("2025-06-16T10:20:30Z"),
      {
        betweenCopies: async () => {
          await db.query("INSERT INTO memories (content) VALUES ('written between the copies')");
          // New WAL and data files, and old ones changed: none of it in the first copy.
          await db.query("SELECT pg_switch_wal()");
          await db.query("CREATE TABLE late_table AS SELECT generate_series(1, 5000) AS n");
          await db.query("CHECKPOINT");
        },
      },
    );
    const restoredDir = join(work, "late-restored", "pglite");
    await restoreEmbedded(made.path, restoredDir);
    const restored = await openPglite(restoredDir);
    try {
      const memory = await restored.query(
        "SELECT 1 FROM memories WHERE content = 'written between the copies'",
      );
      expect(memory.rows).toHaveLength(1);
      const late = await restored.query<{ n: number }>("SELECT count(*)::int AS n FROM late_table");
      expect(late.rows[0]!.n).toBe(5000);
    } finally {
      await restored.close();
    }
  }, 120_000);

  it("abandoned (the app stopping), leaves nothing behind", async () => {
    const stopping = new AbortController();
    const dir = join(work, "abandoned");
    const abandoned = backupOpenDatabase(db.embedded!, dir, new Date(), {
      signal: stopping.signal,
      betweenCopies: async () => stopping.abort(),
    });
    await expect(abandoned).rejects.toThrow(/abort/i);
    expect(await readdir(dir)).toEqual([]);
  });

  it("refuses a backup directory inside the database's own directory", async () => {
    await expect(
      backupOpenDatabase(db.embedded!, join(work, "data", "pglite", "backups"), new Date()),
    ).rejects.toThrow(/must not be inside/);
  });
});

describe("BackupSchedule", () => {
  it("takes the first backup an interval after the start when none is recent, then one per interval, pruning by the rule", async () => {
    const backupDir = join(work, "scheduled");
    // 35 backups of early 2020 and a file that is not one; an unfinished backup of a killed app.
    const old = Array.from({ length: 35 }, (_, day) => {
      const date = new Date(Date.UTC(2020, 0, 1 + day, 3));
      return `stavrobot-${date.toISOString().slice(0, 19).replaceAll(":", "-")}Z.sql.gz`;
    });
    await rm(backupDir, { recursive: true, force: true });
    await mkdir(join(backupDir, ".stavrobot-x.copy", "base"), { recursive: true });
    await Promise.all(
      [...old, "notes.txt", ".stavrobot-x.partial"].map((name) => writeFile(join(backupDir, name), "")),
    );

    const schedule = new BackupSchedule({
      files: db.embedded!,
      destDir: backupDir,
      intervalMs: 1_500,
      logger: silentLogger,
    });
    await schedule.start();
    try {
      const fresh = async () => (await readdir(backupDir)).filter((name) => name.endsWith(".pglite.tar.gz"));
      const deadline = Date.now() + 60_000;
      while ((await fresh()).length < 2 && Date.now() < deadline) {
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
      expect((await fresh()).length).toBeGreaterThanOrEqual(2);
    } finally {
      await schedule.stop();
    }
    const names = await readdir(backupDir);
    expect(names).not.toContain(".stavrobot-x.partial");
    expect(names).not.toContain(".stavrobot-x.copy");
    expect(names).toContain("notes.txt");
    // Nothing left that the rule would delete, and of the old ones only the newest that fit in 30.
    expect(backupsToDelete(names, new Date())).toEqual([]);
    const made = names.filter((name) => name.endsWith(".pglite.tar.gz")).length;
    expect(names.filter((name) => name.startsWith("stavrobot-2020-"))).toEqual(old.slice(35 - (30 - made)));
  }, 120_000);

  it("after a restart, the next is due an interval after the newest backup, and never in the first 10 minutes", async () => {
    const day = 86_400_000;
    const nextIn = async (newest: Date | undefined): Promise<number> => {
      const dir = join(work, `restarted-${Math.random().toString(36).slice(2)}`);
      await mkdir(dir);
      if (newest) {
        await writeFile(join(dir, backupName(newest, "pglite.tar.gz")), "");
      }
      const lines: string[] = [];
      const schedule = new BackupSchedule({
        files: db.embedded!,
        destDir: dir,
        intervalMs: day,
        logger: createLogger("backup", "info", (line) => lines.push(line)),
      });
      await schedule.start();
      await schedule.stop();
      return JSON.parse(/\{.*\}$/.exec(lines.at(-1) ?? "")?.[0] ?? "{}").nextInSeconds as number;
    };
    const hoursAgo = (hours: number) => new Date(Date.now() - hours * 3_600_000);
    // A backup an hour old: the next in 23 hours, not at this start.
    expect(await nextIn(hoursAgo(1))).toBeGreaterThan(23 * 3600 - 60);
    expect(await nextIn(hoursAgo(1))).toBeLessThanOrEqual(23 * 3600);
    // None, or one older than a day: 10 minutes after the start.
    expect(await nextIn(undefined)).toBe(600);
    expect(await nextIn(hoursAgo(49))).toBe(600);
  });
});

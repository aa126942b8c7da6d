import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { startFakeAnthropic, textTurn, type FakeLlmServer } from "@stavrobot/common/test-support";
import { backupsToDelete } from "../src/db/backup-retention.js";
import {
  INTERNAL_SECRET,
  configFor,
  createTestEnv,
  post,
  startTestApp,
  type TestEnv,
} from "./helpers/app.js";
import { runToExit, startAppProcess, type AppProcess } from "./helpers/process.js";

// `npm start` on the embedded database backs it up while it runs, on a schedule, and `npm run
// backup` asks it for one; `npm run restore` brings a backup back into a fresh data directory.
// Always the embedded database (a server is backed up by pg-backup), whatever this run uses.

let fake: FakeLlmServer;
let testEnv: TestEnv;
let env: NodeJS.ProcessEnv;
let app: AppProcess | undefined;
let restoredDir: string | undefined;
const BACKUP_CLI = "app/src/boot/backup-cli.ts";

/** 35 daily backups of early 2020 (older than anything the rule keeps by month). */
const old = Array.from({ length: 35 }, (_, day) => {
  const date = new Date(Date.UTC(2020, 0, 1 + day, 3));
  return `stavrobot-${date.toISOString().slice(0, 19).replaceAll(":", "-")}Z.sql.gz`;
});

beforeAll(async () => {
  fake = await startFakeAnthropic();
  testEnv = await createTestEnv(configFor(fake));
  // eslint-disable-next-line @typescript-eslint/no-unused-vars
  const { DATABASE_URL, PGHOST, PGDATABASE, ...embedded } = testEnv.env;
  env = { ...embedded, BACKUP_INTERVAL_SECONDS: "3" };
  const backups = join(testEnv.dir, "backups");
  mkdirSync(backups);
  for (const name of [...old, "notes.txt"]) writeFileSync(join(backups, name), "");
});
afterAll(async () => {
  await app?.stop();
  await fake?.close();
  await testEnv?.cleanup();
  if (restoredDir) rmSync(restoredDir, { recursive: true, force: true });
});

const backupDir = () => join(testEnv.dir, "backups");
const archives = () =>
  readdirSync(backupDir())
    .filter((name) => name.endsWith(".pglite.tar.gz"))
    .sort();

describe("the embedded database of a running app", () => {
  it("is backed up on schedule, with the retention rule applied, and by npm run backup", async () => {
    app = await startAppProcess(env);
    fake.enqueue(textTurn("Noted: the blue door."));
    expect((await post(app.port, "/chat", { message: "remember the blue door" })).status).toBe(200);

    // The first an interval after the start (the newest there is from 2020), the next one later.
    await vi.waitUntil(() => archives().length >= 2, { timeout: 120_000, interval: 200 });
    expect(app.output()).toMatch(
      /\[app:backup\] wrote .*pglite\.tar\.gz \(\d+ bytes; statements waited \d+ ms\)/,
    );

    // npm run backup asks the running app, which takes it without stopping.
    const asked = await runToExit([BACKUP_CLI, "backup"], env, { timeoutMs: 120_000 });
    expect(asked.output).toContain(`the app (pid ${app.child.pid}) is running: asking it for the backup`);
    expect(asked.code).toBe(0);
    const written = /wrote (\S+pglite\.tar\.gz) \((\d+) bytes\)/.exec(asked.output);
    expect(written).not.toBeNull();
    expect(existsSync(written![1]!)).toBe(true);

    // Only with the internal secret.
    const stranger = await fetch(`http://127.0.0.1:${app.internalPort}/backup`, { method: "POST" });
    expect(stranger.status).toBe(401);

    // A restore, or a backup elsewhere, while it runs: refused, saying why.
    const restore = await runToExit([BACKUP_CLI, "restore", written![1]!], env);
    expect(restore.code).toBe(1);
    expect(restore.output).toContain(
      `Another Stavrobot (pid ${app.child.pid}) is running on the data directory`,
    );
    const elsewhere = await runToExit([BACKUP_CLI, "backup", "--dir", join(testEnv.dir, "other")], env);
    expect(elsewhere.code).toBe(1);
    expect(elsewhere.output).toContain("so it takes the backup itself, into its BACKUP_DIR");

    expect(await app.stop()).toBe(0);
    app = undefined;
    const names = readdirSync(backupDir());
    // Whole archives only, owner-only; nothing the rule would delete; of 2020, what fits in 30.
    expect(names.filter((name) => name.startsWith("."))).toEqual([]);
    for (const name of archives()) expect(statSync(join(backupDir(), name)).mode & 0o777).toBe(0o600);
    expect(backupsToDelete(names, new Date())).toEqual([]);
    expect(names).toContain("notes.txt");
    const made = archives().length;
    expect(made).toBeLessThan(30);
    expect(names.filter((name) => name.startsWith("stavrobot-2020-")).sort()).toEqual(
      old.slice(35 - (30 - made)),
    );
  }, 300_000);

  it("restores with npm run restore into a fresh data directory, the conversation intact", async () => {
    const newest = archives().at(-1)!;
    restoredDir = mkdtempSync(join(tmpdir(), "stavrobot-restored-"));
    const restoredEnv = { ...env, DATA_DIR: restoredDir, BACKUP_INTERVAL_SECONDS: "0" };
    const restore = await runToExit([BACKUP_CLI, "restore", join(backupDir(), newest)], restoredEnv, {
      timeoutMs: 120_000,
    });
    expect(restore.output).toContain(
      `restored ${join(backupDir(), newest)} into ${join(restoredDir, "pglite")}`,
    );
    expect(restore.code).toBe(0);

    app = await startAppProcess(restoredEnv);
    fake.enqueue(textTurn("The blue one."));
    const sent = fake.requests.length;
    expect((await post(app.port, "/chat", { message: "which door?" })).body.response).toBe("The blue one.");
    const history = JSON.stringify(fake.requests[sent]?.body);
    expect(history).toContain("remember the blue door");
    expect(history).toContain("Noted: the blue door.");
    expect(await app.stop()).toBe(0);
    app = undefined;

    // Over the database now there (the README's `npm run restore -- <file> --force`): refused
    // without --force, saying so; replaced with it, the old one kept beside it.
    const archive = join(backupDir(), newest);
    const refused = await runToExit([BACKUP_CLI, "restore", archive], restoredEnv, { timeoutMs: 120_000 });
    expect(refused.code).toBe(1);
    expect(refused.output).toContain("--force");
    const forced = await runToExit([BACKUP_CLI, "restore", archive, "--force"], restoredEnv, {
      timeoutMs: 120_000,
    });
    expect(forced.code).toBe(0);
    expect(readdirSync(restoredDir).filter((name) => name.startsWith("pglite.replaced-"))).toHaveLength(1);
  }, 300_000);

  it("is backed up by npm run backup itself once the app is stopped", async () => {
    const before = archives();
    const result = await runToExit([BACKUP_CLI, "backup"], env, { timeoutMs: 120_000 });
    expect(result.code).toBe(0);
    expect(result.output).not.toContain("asking it");
    const added = archives().filter((name) => !before.includes(name));
    expect(added).toHaveLength(1);
    expect(result.output).toContain(`wrote ${join(backupDir(), added[0]!)}`);
    // It held the data directory's lock only while it ran.
    expect(existsSync(join(testEnv.dir, "instance.lock"))).toBe(false);
  }, 120_000);
});

describe.runIf(Boolean(process.env.TEST_DATABASE_URL))("an app on a PostgreSQL server", () => {
  it("takes no backup itself (pg-backup does), and its /backup says so", async () => {
    const serverEnv = await createTestEnv(configFor(fake));
    const serverApp = await startTestApp(serverEnv);
    try {
      const response = await fetch(`http://127.0.0.1:${serverApp.internalPort}/backup`, {
        method: "POST",
        headers: { Authorization: `Bearer ${INTERNAL_SECRET}` },
      });
      expect(response.status).toBe(409);
      expect(((await response.json()) as { error: string }).error).toContain("npm run backup uses pg_dump");
      expect(existsSync(join(serverEnv.dir, "backups"))).toBe(false);
    } finally {
      await serverApp.close();
      await serverEnv.cleanup();
    }
  });
});

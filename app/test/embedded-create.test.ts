/**
 * Creating the embedded database without initdb in the app's process: from a prepared database,
 * made once by a short-lived child process (db/pglite-create.ts). These tests use the embedded
 * database whatever TEST_DATABASE_URL says: it is what they are about.
 */
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  readdirSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { StartRefused } from "@stavrobot/common";
import { startFakeAnthropic, textTurn, type FakeLlmServer } from "@stavrobot/common/test-support";
import { migrations } from "../src/db/migrations.js";
import { ensureEmbeddedDatabase, templateKey } from "../src/db/pglite-create.js";
import { EXIT_DAMAGED_DATABASE, EmbeddedDatabaseError, openPglite } from "../src/db/pglite.js";
import type { Database } from "../src/db/types.js";
import { configFor, post } from "./helpers/app.js";
import { NPM_START, repoRoot, runToExit, startAppProcess, type AppProcess } from "./helpers/process.js";

let work: string;
/** Prepared databases of this file: made by its first test, copied by the others. */
let templates: string;
let open: Database[] = [];
let running: AppProcess | undefined;
let fake: FakeLlmServer | undefined;

beforeAll(() => {
  templates = mkdtempSync(join(tmpdir(), "stavrobot-templates-"));
});

afterAll(() => rmSync(templates, { recursive: true, force: true }));

beforeEach(() => {
  work = mkdtempSync(join(tmpdir(), "stavrobot-create-"));
});

afterEach(async () => {
  await running?.stop();
  running = undefined;
  await fake?.close();
  fake = undefined;
  for (const db of open) await db.close().catch(() => undefined);
  open = [];
  rmSync(work, { recursive: true, force: true });
});

async function opened(dir: string, templateDir = templates): Promise<Database> {
  const db = await openPglite(dir, { templateDir });
  open.push(db);
  return db;
}

async function close(db: Database): Promise<void> {
  open = open.filter((other) => other !== db);
  await db.close();
}

async function appliedVersions(db: Database): Promise<number[]> {
  const result = await db.query<{ version: number }>("SELECT version FROM schema_version ORDER BY version");
  return result.rows.map((row) => row.version);
}

describe("creating the embedded database", () => {
  it("copies a prepared, migrated database made once by a child process; data survives reopening", async () => {
    const first = join(work, "a", "pglite");
    const db = await opened(first);
    // Made by the child and kept, every migration applied.
    expect(existsSync(join(templates, templateKey(), "PG_VERSION"))).toBe(true);
    expect(await appliedVersions(db)).toEqual(migrations.map((m) => m.version));
    await db.query("INSERT INTO schema_version (version, name) VALUES (9999, 'written by the test')");
    await close(db);

    const again = await opened(first);
    expect(await appliedVersions(again)).toContain(9999);
    await close(again);

    // A second new database is a copy of the prepared one (no second child), and it is its own.
    const second = join(work, "b", "pglite");
    expect(await ensureEmbeddedDatabase(second, { templateDir: templates })).toBe("template");
    const other = await opened(second);
    expect(await appliedVersions(other)).toEqual(migrations.map((m) => m.version));
    // Nothing of the creation is left beside either database.
    expect(readdirSync(join(work, "a"))).toEqual(["pglite"]);
    expect(readdirSync(join(work, "b"))).toEqual(["pglite"]);
  }, 300_000);

  it("creates the database in the child, straight into place, when no prepared one can be kept", async () => {
    // A file where the directory of prepared databases would go: it cannot be made.
    writeFileSync(join(work, "not-a-directory"), "");
    const templateDir = join(work, "not-a-directory", "templates");
    const dir = join(work, "c", "pglite");
    expect(await ensureEmbeddedDatabase(dir, { templateDir })).toBe("child");
    const db = await opened(dir, templateDir);
    expect(await appliedVersions(db)).toEqual(migrations.map((m) => m.version));
  }, 300_000);

  it("moves aside a directory holding files but no database, loses none of them, and creates one", async () => {
    const dir = join(work, "d", "pglite");
    mkdirSync(join(dir, "base"), { recursive: true });
    writeFileSync(join(dir, "base", "half-written"), "what an interrupted creation left");
    const db = await opened(dir);
    expect(await appliedVersions(db)).toEqual(migrations.map((m) => m.version));
    const aside = readdirSync(join(work, "d")).filter((name) => name.startsWith("pglite.incomplete-"));
    expect(aside).toHaveLength(1);
    expect(readFileSync(join(work, "d", aside[0] as string, "base", "half-written"), "utf8")).toBe(
      "what an interrupted creation left",
    );
  }, 300_000);

  it("removes what an interrupted creation left beside the data directory", async () => {
    const parent = join(work, "e");
    mkdirSync(join(parent, ".pglite.creating-abc123", "base"), { recursive: true });
    writeFileSync(join(parent, ".pglite.creating-abc123", "PG_VERSION"), "18\n");
    const db = await opened(join(parent, "pglite"));
    expect(await appliedVersions(db)).toEqual(migrations.map((m) => m.version));
    expect(readdirSync(parent)).toEqual(["pglite"]);
  }, 300_000);

  it("refuses a damaged database with a clear error and leaves its files as they are", async () => {
    const dir = join(work, "f", "pglite");
    const db = await opened(dir);
    await db.query("INSERT INTO schema_version (version, name) VALUES (9999, 'kept')");
    await close(db);
    rmSync(join(dir, "global", "pg_control"));
    const before = readdirSync(dir, { recursive: true }).sort();

    const error = await openPglite(dir, { templateDir: templates }).then(
      () => undefined,
      (caught: unknown) => caught,
    );
    expect(error).toBeInstanceOf(EmbeddedDatabaseError);
    // A start ends on it in one line with its own exit code (boot/refusal.ts's exitForRefusal).
    expect(error).toBeInstanceOf(StartRefused);
    expect((error as StartRefused).exitCode).toBe(EXIT_DAMAGED_DATABASE);
    expect((error as Error).message).toContain('could not open file "global/pg_control"');
    expect((error as Error).message).toMatch(
      /the embedded database in .*f\/pglite could not be opened .*damaged or incomplete; they were left as they are\. Restore a backup/,
    );
    // Not replaced, not moved: the same files, the database's own still there.
    expect(readdirSync(dir, { recursive: true }).sort()).toEqual(before);
    expect(readdirSync(join(work, "f"))).toEqual(["pglite"]);
  }, 300_000);
});

/** A data directory holding only a config for `fake`, and the environment `npm start` gets. */
function emptyInstall(fake: FakeLlmServer, templateDir: string): { dataDir: string; env: NodeJS.ProcessEnv } {
  const dataDir = join(work, "data");
  mkdirSync(join(dataDir, "main"), { recursive: true });
  writeFileSync(join(dataDir, "main", "config.toml"), configFor(fake));
  // No DATABASE_URL: the embedded database.
  const env: NodeJS.ProcessEnv = {
    PATH: process.env.PATH,
    HOME: process.env.HOME,
    TZ: "UTC",
    DATA_DIR: dataDir,
    PGLITE_TEMPLATE_DIR: templateDir,
    STAVROBOT_INTERNAL_SECRET: "internal-secret-for-the-test",
  };
  return { dataDir, env };
}

/** `npm install`'s last step (package.json's postinstall), to its exit. */
const prepareInstall = (env: NodeJS.ProcessEnv) =>
  runToExit(["scripts/prepare.mjs"], env, { javascript: true, timeoutMs: 240_000 });

describe("npm start on an empty embedded database", () => {
  it("creates it outside the app's process: its memory stays low, and what it stored survives a restart", async () => {
    fake = await startFakeAnthropic();
    fake.setResponder(() => textTurn("noted"));
    // No prepared database kept yet (an install whose own preparation did not run).
    const { dataDir, env } = emptyInstall(fake, join(work, "templates"));
    running = await startAppProcess(env, 240_000, NPM_START);
    expect(running.output()).toContain("created the embedded database");
    const reply = await post(running.port, "/chat", { message: "remember the blue door" });
    expect(reply.body.response).toBe("noted");
    // initdb ran in the child: the app's own peak is far below the ~750 MB it reached running it.
    const status = readFileSync(`/proc/${running.child.pid}/status`, "utf8");
    const peakMb = Number(/VmHWM:\s+(\d+)/.exec(status)?.[1]) / 1024;
    expect(peakMb).toBeGreaterThan(0);
    expect(peakMb).toBeLessThan(450);
    expect(await running.stop("SIGTERM")).toBe(0);

    running = await startAppProcess(env, 120_000, NPM_START);
    expect(running.output()).not.toContain("created the embedded database");
    await running.stop("SIGTERM");
    running = undefined;
    const db = await opened(join(dataDir, "pglite"));
    const stored = await db.query<{ n: number }>(
      "SELECT count(*)::int AS n FROM messages WHERE content::text LIKE '%remember the blue door%'",
    );
    expect(stored.rows[0]?.n).toBeGreaterThan(0);
  }, 400_000);

  it("copies the prepared database npm install kept, and npm install succeeds where it cannot keep one", async () => {
    const manifest = JSON.parse(readFileSync(join(repoRoot, "package.json"), "utf8")) as {
      scripts: Record<string, string>;
    };
    expect(manifest.scripts.postinstall).toBe("node scripts/prepare.mjs");
    fake = await startFakeAnthropic();
    fake.setResponder(() => textTurn("noted"));
    const templateDir = join(work, "templates");
    const { env } = emptyInstall(fake, templateDir);
    const prepared = await prepareInstall(env);
    expect(prepared.code).toBe(0);
    expect(prepared.output).toContain("Prepared embedded database");
    expect(existsSync(join(templateDir, templateKey(), "PG_VERSION"))).toBe(true);

    running = await startAppProcess(env, 120_000, NPM_START);
    expect(running.output()).toMatch(/created the embedded database.*"from":"prepared database"/);
    expect((await post(running.port, "/chat", { message: "hello" })).body.response).toBe("noted");
    expect(await running.stop("SIGTERM")).toBe(0);
    running = undefined;

    // A file where the directory of prepared databases would go: said, and the install goes on.
    writeFileSync(join(work, "not-a-directory"), "");
    const refused = await prepareInstall({ ...env, PGLITE_TEMPLATE_DIR: join(work, "not-a-directory", "t") });
    expect(refused.code).toBe(0);
    expect(refused.output).toContain("ENOTDIR");
    expect(refused.output).toContain("Could not prepare the embedded database (exit 1)");
  }, 300_000);
});

import {
  existsSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  readdirSync,
  readlinkSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { gzipSync } from "node:zlib";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { silentLogger } from "@stavrobot/common";
import { startFakeAnthropic, textTurn, type FakeLlmServer } from "@stavrobot/common/test-support";
import { startApp, type RunningApp } from "../src/app.js";
import { readFullBackup } from "../src/db/full-restore.js";
import { configFor, createTestEnv, post, type TestEnv } from "./helpers/app.js";
import { raw } from "./helpers/http.js";
import { runToExit } from "./helpers/process.js";

// The Settings page's backup: everything needed to set the assistant up again, taken while it
// runs, and `npm run restore` bringing it back into an empty data directory. The database part
// is the embedded one's (a server's is pg_dump's), whatever this run uses.

let fake: FakeLlmServer;
let testEnv: TestEnv;
let env: NodeJS.ProcessEnv;
let app: RunningApp | undefined;
const scratch = mkdtempSync(join(tmpdir(), "stavrobot-full-backup-"));
const BACKUP_CLI = "app/src/boot/backup-cli.ts";

beforeAll(async () => {
  fake = await startFakeAnthropic();
  testEnv = await createTestEnv(configFor(fake));
  // eslint-disable-next-line @typescript-eslint/no-unused-vars
  const { DATABASE_URL, PGHOST, PGDATABASE, CONFIG_PATH, ...embedded } = testEnv.env;
  env = { ...embedded, BACKUP_INTERVAL_SECONDS: "0" };
  const dir = testEnv.dir;
  // A plugin (an executable tool, a link in its environment), its state, a stored file, and what
  // is left out: a cache and earlier backups.
  mkdirSync(join(dir, "plugins", "weather", "forecast", ".venv"), { recursive: true });
  writeFileSync(join(dir, "plugins", "weather", "forecast", "run.sh"), "#!/bin/sh\necho sunny\n", {
    mode: 0o755,
  });
  symlinkSync("/usr/bin/python3", join(dir, "plugins", "weather", "forecast", ".venv", "python"));
  mkdirSync(join(dir, "plugin-data", "weather"), { recursive: true });
  writeFileSync(join(dir, "plugin-data", "weather", "config.json"), '{"city":"Athens"}');
  mkdirSync(join(dir, "cache", "plugins"), { recursive: true });
  writeFileSync(join(dir, "cache", "plugins", "big.bin"), "cache");
  mkdirSync(join(dir, "backups"), { recursive: true });
  writeFileSync(join(dir, "backups", "stavrobot-2020-01-01T00-00-00Z.sql.gz"), "old");
  app = await startApp({ env, logger: silentLogger });
});

afterAll(async () => {
  await app?.close();
  await fake?.close();
  await testEnv?.cleanup();
  rmSync(scratch, { recursive: true, force: true });
});

describe("a full backup from the running app", () => {
  let archive: string;

  it("is the owner's, and refused to another site's page", async () => {
    const port = app!.port;
    expect((await raw(port, "GET", "/api/backup/download", { auth: null })).status).toBe(401);
    const crossSite = await raw(port, "GET", "/api/backup/download", {
      headers: { "Sec-Fetch-Site": "cross-site" },
    });
    expect(crossSite.status).toBe(403);
    expect(crossSite.json.error).toContain("Settings page");
    expect((await raw(port, "GET", "/api/backup")).json).toEqual({ database: "embedded" });
  });

  it("holds the database, config, secrets, plugins and their state, taken while it runs", async () => {
    fake.enqueue(textTurn("Noted: the green gate."));
    expect((await post(app!.port, "/chat", { message: "remember the green gate" })).status).toBe(200);
    const response = await fetch(`http://127.0.0.1:${app!.port}/api/backup/download`, {
      headers: { Authorization: `Basic ${Buffer.from(":test-password-123").toString("base64")}` },
    });
    expect(response.status).toBe(200);
    expect(response.headers.get("content-type")).toBe("application/gzip");
    const disposition = response.headers.get("content-disposition") ?? "";
    const name = /filename="(stavrobot-full-[0-9TZ-]+\.tar\.gz)"/.exec(disposition)?.[1];
    expect(name).toBeDefined();
    archive = join(scratch, name!);
    writeFileSync(archive, Buffer.from(await response.arrayBuffer()));
    // The archive was a temporary file: nothing is left of it.
    await vi.waitFor(() =>
      expect(readdirSync(join(testEnv.dir, "backups"))).toEqual(["stavrobot-2020-01-01T00-00-00Z.sql.gz"]),
    );

    const full = await readFullBackup(archive);
    expect(full?.manifest).toMatchObject({ format: "stavrobot-full", version: 1, database: "embedded" });
    const names = full!.entries.map((entry) => entry.name);
    for (const expected of [
      "pglite/PG_VERSION",
      "main/config.toml",
      "plugins/weather/forecast/run.sh",
      "plugins/weather/forecast/.venv/python",
      "plugin-data/weather/config.json",
    ]) {
      expect(names).toContain(expected);
    }
    expect(
      names.filter((entry) => /^(cache|backups|instance\.lock|pglite\/postmaster\.pid)/.test(entry)),
    ).toEqual([]);
    const tool = full!.entries.find((entry) => entry.name === "plugins/weather/forecast/run.sh");
    expect(tool?.mode).toBe(0o755);
  });

  it("is restored by npm run restore into an empty data directory, and refused over data without --force", async () => {
    await app!.close();
    app = undefined;
    const restored = join(scratch, "restored");
    const restoredEnv = { ...env, DATA_DIR: restored };
    const restore = await runToExit([BACKUP_CLI, "restore", archive], restoredEnv, { timeoutMs: 120_000 });
    expect(restore.output).toContain("restored");
    expect(restore.code).toBe(0);
    expect(readFileSync(join(restored, "main", "config.toml"), "utf8")).toBe(
      readFileSync(join(testEnv.dir, "main", "config.toml"), "utf8"),
    );
    expect(statSync(join(restored, "plugins", "weather", "forecast", "run.sh")).mode & 0o777).toBe(0o755);
    expect(readlinkSync(join(restored, "plugins", "weather", "forecast", ".venv", "python"))).toBe(
      "/usr/bin/python3",
    );
    expect(existsSync(join(restored, "cache"))).toBe(false);

    // The restored assistant starts on it and remembers the conversation.
    const again = await startApp({ env: restoredEnv, logger: silentLogger });
    try {
      const rows = await again.db.query<{ count: number }>(
        "SELECT count(*)::int AS count FROM messages WHERE content::text LIKE '%green gate%'",
      );
      expect(Number(rows.rows[0]?.count)).toBeGreaterThan(0);
    } finally {
      await again.close();
    }

    const refused = await runToExit([BACKUP_CLI, "restore", archive], restoredEnv, { timeoutMs: 120_000 });
    expect(refused.code).toBe(1);
    expect(refused.output).toMatch(/already holds .*main.*--force/);
    const forced = await runToExit([BACKUP_CLI, "restore", archive, "--force"], restoredEnv, {
      timeoutMs: 120_000,
    });
    expect(forced.code).toBe(0);
    const aside = readdirSync(restored).filter((entry) => entry.includes(".replaced-"));
    expect(aside.some((entry) => entry.startsWith("main.replaced-"))).toBe(true);
    expect(aside.some((entry) => entry.startsWith("pglite.replaced-"))).toBe(true);
  }, 300_000);

  it("refuses a damaged archive, saying so, and changes nothing", async () => {
    const damaged = join(scratch, "damaged.tar.gz");
    writeFileSync(damaged, readFileSync(archive).subarray(0, 2000));
    const empty = join(scratch, "empty");
    const restore = await runToExit([BACKUP_CLI, "restore", damaged], { ...env, DATA_DIR: empty });
    expect(restore.code).toBe(1);
    expect(restore.output).toMatch(/damaged|not an embedded-database backup/);
    expect(existsSync(join(empty, "main"))).toBe(false);
    // A manifest of an unknown format is named.
    const foreign = join(scratch, "foreign.tar.gz");
    const manifest = Buffer.from(JSON.stringify({ format: "stavrobot-full", version: 9 }));
    const header = Buffer.alloc(512);
    header.write("stavrobot-backup.json", 0);
    header.write("0000600\0", 100);
    header.write("0000000\0", 108);
    header.write("0000000\0", 116);
    header.write(manifest.length.toString(8).padStart(11, "0") + "\0", 124);
    header.write("00000000000\0", 136);
    header.write("        ", 148);
    header.write("0", 156);
    header.write("ustar\0", 257);
    header.write("00", 263);
    const sum = header.reduce((total, byte) => total + byte, 0);
    header.write(sum.toString(8).padStart(6, "0") + "\0 ", 148);
    const body = Buffer.concat([header, manifest, Buffer.alloc(512 - manifest.length), Buffer.alloc(1024)]);
    writeFileSync(foreign, gzipSync(body));
    const refused = await runToExit([BACKUP_CLI, "restore", foreign], { ...env, DATA_DIR: empty });
    expect(refused.code).toBe(1);
    expect(refused.output).toContain("a format this version cannot restore");
    expect(lstatSync(scratch).isDirectory()).toBe(true);
  });
});

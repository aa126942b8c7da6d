import { spawnSync } from "node:child_process";
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  readdirSync,
  rmSync,
  statSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { gzipSync } from "node:zlib";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { writeFullBackup } from "../src/db/full-backup.js";
import { repoRoot } from "./helpers/process.js";

// scripts/compose-restore.sh: the Settings page's full backup (laid out as an `npm start` data
// directory wherever it was taken; in compose the siblings send their parts) put back into the
// compose stack's own directories.

const SCRIPT = join(repoRoot, "scripts", "compose-restore.sh");
const scratch = mkdtempSync(join(tmpdir(), "stavrobot-compose-restore-"));
let archive: string;

function put(path: string, text: string, mode = 0o600): void {
  mkdirSync(join(path, ".."), { recursive: true });
  writeFileSync(path, text, { mode });
}

/** A directory laid out as a compose install: docker-compose.yml beside data/. */
function composeDir(name: string): string {
  const dir = join(scratch, name);
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, "docker-compose.yml"), "services: {}\n");
  return dir;
}

function restore(dir: string, ...args: string[]): { code: number | null; output: string } {
  const run = spawnSync("bash", [SCRIPT, ...args], { cwd: dir, encoding: "utf8" });
  return { code: run.status, output: run.stdout + run.stderr };
}

beforeAll(async () => {
  // The archive's layout: the siblings' parts beside the app's, the config and the secret outside
  // the data directory (as compose mounts them).
  const data = join(scratch, "srv", "data");
  put(join(data, "files", "uploads", "note.txt"), "an upload");
  put(join(data, "plugins", "weather", "forecast", "run.sh"), "#!/bin/sh\necho sunny\n", 0o755);
  put(join(data, "plugin-data", "weather", "config.json"), '{"city":"Athens"}');
  put(join(data, "plugin-runner", "permissions.json"), "{}");
  put(join(data, "signal-cli", "data", "accounts.json"), "{}");
  put(join(data, "coder", "credentials.json"), "{}");
  put(join(scratch, "srv", "config", "config.toml"), 'password = "restored"\n');
  put(join(scratch, "srv", "secrets", "internal-secret"), "restored-secret");
  const backup = await writeFullBackup(
    {
      dataDir: data,
      configPath: join(scratch, "srv", "config", "config.toml"),
      secretFile: join(scratch, "srv", "secrets", "internal-secret"),
      backupDir: join(scratch, "backups"),
      database: undefined,
    },
    new Date("2026-11-26T10:00:00Z"),
  );
  archive = join(scratch, backup.name);
  writeFileSync(archive, readFileSync(backup.path));
});

afterAll(() => {
  rmSync(scratch, { recursive: true, force: true });
});

describe("scripts/compose-restore.sh", () => {
  it("puts each part where the compose file mounts it", () => {
    const dir = composeDir("fresh");
    const { code, output } = restore(dir, archive);
    expect(code, output).toBe(0);
    const data = join(dir, "data");
    expect(readFileSync(join(data, "main", "config.toml"), "utf8")).toContain("restored");
    expect(readFileSync(join(data, "secrets", "internal-secret"), "utf8")).toBe("restored-secret");
    expect(readFileSync(join(data, "plugins", "weather", "forecast", "run.sh"), "utf8")).toContain("sunny");
    expect(statSync(join(data, "plugins", "weather", "forecast", "run.sh")).mode & 0o111).not.toBe(0);
    expect(existsSync(join(data, "plugin-data", "weather", "config.json"))).toBe(true);
    expect(existsSync(join(data, "plugin-runner", "permissions.json"))).toBe(true);
    expect(existsSync(join(data, "signal-cli", "data", "accounts.json"))).toBe(true);
    expect(existsSync(join(data, "coder", "credentials.json"))).toBe(true);
    expect(readFileSync(join(data, "app", "files", "uploads", "note.txt"), "utf8")).toBe("an upload");
    // Nothing of the archive's own bookkeeping or the staging directory is left behind.
    expect(readdirSync(data).sort()).toEqual(
      ["app", "coder", "main", "plugin-data", "plugin-runner", "plugins", "secrets", "signal-cli"].sort(),
    );
    expect(output).toContain("pg-restore.sh");
  });

  it("replaces nothing without --force, and keeps what --force replaced", () => {
    const dir = composeDir("existing");
    put(join(dir, "data", "main", "config.toml"), 'password = "current"\n');
    put(join(dir, "data", "plugins", "other", "manifest.json"), "{}");
    const refused = restore(dir, archive);
    expect(refused.code).toBe(1);
    expect(refused.output).toContain("already present: data/main/config.toml data/plugins");
    expect(refused.output).toContain("--force");
    expect(readFileSync(join(dir, "data", "main", "config.toml"), "utf8")).toContain("current");

    const forced = restore(dir, "--force", archive);
    expect(forced.code, forced.output).toBe(0);
    expect(readFileSync(join(dir, "data", "main", "config.toml"), "utf8")).toContain("restored");
    const kept = readdirSync(join(dir, "data")).filter((name) => name.startsWith("plugins.replaced-"));
    expect(kept).toHaveLength(1);
    expect(existsSync(join(dir, "data", kept[0]!, "other", "manifest.json"))).toBe(true);
  });

  it("refuses what is not a full backup, a damaged file, a missing one, and the wrong directory", () => {
    const dir = composeDir("refusals");
    const database = join(scratch, "stavrobot-2026-11-26T10-00-00Z.sql.gz");
    writeFileSync(database, gzipSync("CREATE TABLE t ();\n"));
    expect(restore(dir, database).output).toContain("is not a full backup");
    const cut = join(scratch, "cut.tar.gz");
    writeFileSync(cut, readFileSync(archive).subarray(0, 200));
    expect(restore(dir, cut).output).toContain("is not a complete gzip file");
    expect(restore(dir, join(scratch, "nothing.tar.gz")).output).toContain("no such file");
    expect(restore(scratch, archive).output).toContain("the directory holding docker-compose.yml");
    expect(restore(dir).code).toBe(2);
    expect(existsSync(join(dir, "data", "main"))).toBe(false);
    expect(readdirSync(join(dir, "data")).filter((name) => name.startsWith(".restoring-"))).toEqual([]);
  });
});

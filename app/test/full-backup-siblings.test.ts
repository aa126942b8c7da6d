import { execFileSync } from "node:child_process";
import { createServer, type Server } from "node:http";
import { mkdirSync, mkdtempSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { STATE_ARCHIVE_PATH, createServiceClient, tarDir } from "@stavrobot/common";
import { writeFullBackup, type FullBackupSources } from "../src/db/full-backup.js";
import {
  SECRET,
  startPluginHost,
  uniqueName,
  writePlugin,
  type TestPluginHost,
} from "../../plugin-runner/test/helpers.js";

// The full backup where the plugins live with their service, not in the app's data directory (the
// compose stack): the app asks the real plugin-runner for them (`GET /state-archive`), and a
// runner that does not answer or stops short fails the backup instead of leaving them out.

let runner: TestPluginHost;
let cutShort: Server;
let cutShortUrl: string;
const plugin = uniqueName("backed-up");
const scratch = mkdtempSync(join(tmpdir(), "stavrobot-full-backup-siblings-"));

function sources(name: string, baseUrl: string, bearer = SECRET): FullBackupSources {
  const dataDir = join(scratch, name, "data");
  mkdirSync(join(dataDir, "files"), { recursive: true });
  writeFileSync(join(dataDir, "files", "note.txt"), "kept by the app");
  return {
    dataDir,
    configPath: join(scratch, name, "config.toml"),
    secretFile: join(scratch, name, "internal-secret"),
    backupDir: join(scratch, name, "backups"),
    database: undefined,
    siblings: [
      {
        name: "plugin-runner",
        client: createServiceClient({ baseUrl, bearer, retries: 0 }),
        parts: ["plugins", "plugin-data", "plugin-runner"],
      },
    ],
  };
}

const listed = (archive: string): string[] =>
  execFileSync("tar", ["-tvzf", archive]).toString().trim().split("\n");

beforeAll(async () => {
  runner = await startPluginHost();
  writePlugin(runner.pluginsDir, plugin, [{ name: "hello", script: "#!/bin/sh\necho hello\n" }], {
    config: { city: { description: "The city", required: false } },
  });
  const configured = await runner.request("POST", "/configure", { name: plugin, config: { city: "Athens" } });
  expect(configured.status).toBe(200);
  // A sibling whose archive stops after its first entry, as one that died while sending it.
  cutShort = createServer((_req, res) => {
    res.writeHead(200, { "Content-Type": "application/x-tar" });
    res.end(Buffer.from(tarDir("plugins")));
  });
  await new Promise<void>((resolve) => cutShort.listen(0, "127.0.0.1", resolve));
  cutShortUrl = `http://127.0.0.1:${(cutShort.address() as { port: number }).port}`;
});

afterAll(async () => {
  // Its user is this machine's, not the test's.
  await runner?.host.isolation.removeUser(plugin);
  await runner?.close();
  await new Promise((resolve) => cutShort?.close(resolve));
  rmSync(scratch, { recursive: true, force: true });
});

describe("a full backup whose plugins live with the plugin-runner", () => {
  it("holds the runner's plugins, their settings and its state, beside the app's own files", async () => {
    const backup = await writeFullBackup(sources("asked", runner.url), new Date());
    const entries = listed(backup.path);
    const names = entries.map((line) => line.split(/\s+/).at(-1));
    expect(names).toContain("files/note.txt");
    expect(names).toContain(`plugins/${plugin}/manifest.json`);
    expect(names).toContain(`plugins/${plugin}/config.json`);
    expect(names).toContain("plugin-runner/");
    // The tool keeps its executable bit; the archive is one archive (tar read it to its end).
    const tool = entries.find((line) => line.endsWith(`plugins/${plugin}/hello/run.sh`));
    expect(tool?.slice(0, 10)).toMatch(/^-rwx/);
  });

  it("reads the data directory instead when it holds the plugins (npm start)", async () => {
    const local = sources("local", "http://127.0.0.1:9");
    mkdirSync(join(local.dataDir, "plugins", "mine"), { recursive: true });
    writeFileSync(join(local.dataDir, "plugins", "mine", "manifest.json"), "{}");
    const backup = await writeFullBackup(local, new Date());
    expect(listed(backup.path).some((line) => line.endsWith("plugins/mine/manifest.json"))).toBe(true);
  });

  it("fails, saying which service, when the runner does not answer, refuses the secret or stops short", async () => {
    await expect(writeFullBackup(sources("down", "http://127.0.0.1:9"), new Date())).rejects.toThrow(
      /plugin-runner did not send its state \(.*unreachable/,
    );
    await expect(writeFullBackup(sources("refused", runner.url, "wrong"), new Date())).rejects.toThrow(
      /plugin-runner did not send its state \(.*\(401\)/,
    );
    await expect(writeFullBackup(sources("short", cutShortUrl), new Date())).rejects.toThrow(
      "plugin-runner's state came cut short",
    );
    // Nothing half-written is left where backups go.
    for (const name of ["down", "refused", "short"]) {
      const dir = join(scratch, name, "backups");
      expect(execFileSync("ls", ["-A", dir]).toString().trim()).toBe("");
    }
    expect(statSync(join(scratch, "short", "data", "files", "note.txt")).isFile()).toBe(true);
  });
});

it("GET /state-archive is behind the internal secret", async () => {
  const anonymous = await fetch(`${runner.url}${STATE_ARCHIVE_PATH}`);
  expect(anonymous.status).toBe(401);
});

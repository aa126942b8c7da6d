import { cpSync, mkdirSync, readFileSync, readdirSync, rmSync, writeFileSync, chmodSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { AgentToolResult } from "@mariozechner/pi-agent-core";
import { createServiceClient, type ServiceClient } from "@stavrobot/common";
import { createManagePluginsTool } from "../src/tools/manage-plugins.js";
import { createRunPluginTool } from "../src/tools/run-plugin-tool.js";
import { toolPathFor } from "../src/local/tool-path.js";
import {
  sandboxModes,
  SECRET,
  git,
  isRoot,
  makeTempRoot,
  startGitDaemon,
  startPluginHost,
  uniqueName,
  userExists,
  type GitDaemon,
  type TestPluginHost,
} from "../../plugin-runner/test/helpers.js";
import { pluginUserName } from "../../plugin-runner/src/users.js";

const FIXTURE = new URL("./fixtures/published/notes", import.meta.url).pathname;

/** A tiny stand-in for uv: `uv run [--script] FILE ARGS…` runs FILE with python3. */
const UV_SHIM = `#!/bin/sh
[ "$1" = run ] && shift
[ "$1" = --script ] && shift
exec python3 "$@"
`;

function text(result: AgentToolResult<unknown>): string {
  return result.content.map((part) => (part.type === "text" ? part.text : "")).join("");
}

/** Copies the fixture into a git repository named for `plugin`. */
function buildRepo(reposDir: string, plugin: string): void {
  const repo = join(reposDir, plugin);
  cpSync(FIXTURE, repo, { recursive: true });
  for (const file of ["manifest.json", "export_notes/main.py", "slow_export/main.py"]) {
    const path = join(repo, file);
    writeFileSync(path, readFileSync(path, "utf8").replaceAll("__PLUGIN__", plugin));
  }
  git(repo, "init", "-q", "-b", "main");
  git(repo, "add", "-A");
  git(repo, "commit", "-q", "-m", "published");
}

let base: string;
let daemon: GitDaemon;
let shimDir: string;
const plugins: string[] = [];

beforeAll(async () => {
  base = makeTempRoot("published");
  mkdirSync(join(base, "repos"));
  daemon = await startGitDaemon(join(base, "repos"));
  // uv exists only on the launcher's PATH (as when installed in the owner's ~/.local/bin).
  shimDir = join(base, "home", ".local", "bin");
  mkdirSync(shimDir, { recursive: true });
  for (const dir of [join(base, "home"), join(base, "home", ".local"), shimDir]) chmodSync(dir, 0o755);
  writeFileSync(join(shimDir, "uv"), UV_SHIM, { mode: 0o755 });
});

afterAll(async () => {
  await daemon?.stop();
  for (const name of plugins) {
    if (isRoot && userExists(pluginUserName(name))) {
      const { createIsolation } = await import("../../plugin-runner/src/users.js");
      const { silentLogger } = await import("@stavrobot/common");
      await createIsolation({ enabled: true, logger: silentLogger }).removeUser(name);
    }
  }
  rmSync(base, { recursive: true, force: true });
});

describe.each(sandboxModes())("published plugins run unchanged (%s sandbox)", (mode, plainSandbox) => {
  const plugin = uniqueName("notes");
  const victim = uniqueName("victim");
  let pluginHost: TestPluginHost;
  let client: ServiceClient;
  let filesDir: string;
  let appDir: string;
  const call = async (tool: string, parameters?: unknown): Promise<string> => {
    const run = createRunPluginTool({ pluginRunner: client, filesDir });
    return text(
      await run.execute("c", {
        plugin,
        tool,
        ...(parameters === undefined ? {} : { parameters: JSON.stringify(parameters) }),
      }),
    );
  };

  beforeAll(async () => {
    plugins.push(plugin, victim);
    buildRepo(join(base, "repos"), plugin);
    // With namespaces the data directory may sit behind a private parent (a checkout under /root).
    const parent = join(base, `${mode}-owner`);
    mkdirSync(parent);
    chmodSync(parent, plainSandbox ? 0o711 : 0o700);
    const root = join(parent, "data");
    mkdirSync(root);
    appDir = join(root, "main");
    mkdirSync(appDir, { mode: 0o700 });
    writeFileSync(join(appDir, "config.toml"), 'password = "app-password-SECRET"\n', { mode: 0o600 });
    writeFileSync(join(appDir, "internal-secret"), "internal-SECRET-value\n", { mode: 0o600 });
    filesDir = join(root, "files");
    mkdirSync(filesDir, { mode: 0o700 });
    // Another plugin, already installed when the runner starts (it adopts it: own user, mode 700).
    const victimDir = join(root, "plugins", victim);
    mkdirSync(join(victimDir, "tool"), { recursive: true });
    writeFileSync(join(victimDir, "manifest.json"), JSON.stringify({ name: victim, description: "v" }));
    writeFileSync(join(victimDir, "config.json"), JSON.stringify({ token: "victim-SECRET-token" }));
    pluginHost = await startPluginHost({
      root,
      plainSandbox,
      toolPath: toolPathFor(`${shimDir}:${process.env.PATH ?? ""}`),
    });
    client = createServiceClient({ baseUrl: pluginHost.url, bearer: SECRET });
  });

  afterAll(async () => {
    await pluginHost?.close();
  });

  it("installs from git and runs strict tools with a PEP 723 header through uv", async () => {
    const manage = createManagePluginsTool({ pluginRunner: client });
    const installed = text(await manage.execute("c", { action: "install", url: daemon.url(plugin) }));
    expect(installed).toContain(`Plugin "${plugin}" installed.`);
    await client.request("POST", "/configure", { body: { name: plugin, config: { api_key: "k-1" } } });
    const first = await call("add_note", { text: "buy milk" });
    expect(first).toContain(`The run of tool "add_note" (plugin "${plugin}") returned:`);
    expect(first).toContain("saved: buy milk");
    expect(first).toContain("notes_written: 1");
    // The tool rewrote its own config.json: the next run sees it.
    expect(await call("add_note", { text: "call mum" })).toContain("notes_written: 2");
  });

  it("refuses an undeclared parameter itself, naming it and the tool's parameters", async () => {
    await expect(call("add_note", { text: "x", colour: "red" })).rejects.toThrow(
      'Unknown parameter: "colour". Parameters of this tool: text (string)',
    );
  });

  it("returns the files a tool writes to /tmp/<plugin>/ and hands it file parameters there", async () => {
    const exported = await call("export_notes", { title: "Groceries" });
    expect(exported).toContain("exported: 2");
    const saved = join(filesDir, "plugin_output", plugin);
    expect(readdirSync(saved).sort()).toEqual(["out.json", "out.txt"]);
    expect(readFileSync(join(saved, "out.txt"), "utf8")).toBe("# Groceries\n");

    writeFileSync(join(filesDir, "doc.txt"), "one two three four");
    const counted = await call("word_count", { document: join(filesDir, "doc.txt") });
    expect(counted).toContain("words: 4");
    expect(counted).toContain(`path: /tmp/${plugin}/doc.txt`);
    // An input file is not handed back as an output.
    expect(counted).not.toContain("Output files:");
  });

  it("gives two concurrent runs of one plugin only their own files", async () => {
    const [a, b] = await Promise.all([call("slow_export", { tag: "a" }), call("slow_export", { tag: "b" })]);
    expect(a).toContain("seen[1]: out-a.txt");
    expect(b).toContain("seen[1]: out-b.txt");
    expect(a).toContain(`plugin_output/${plugin}/out-a.txt`);
    expect(b).toContain(`plugin_output/${plugin}/out-b.txt`);
  });

  it.runIf(isRoot)(
    "cannot see another plugin, the app's config, the internal secret or other runs",
    async () => {
      const targets = [
        join(pluginHost.pluginsDir, victim, "config.json"),
        join(pluginHost.pluginsDir, victim),
        pluginHost.pluginsDir,
        join(appDir, "config.toml"),
        join(appDir, "internal-secret"),
        pluginHost.runsDir,
        pluginHost.stateDir,
      ];
      const out = await call("snoop", { targets: targets.join("\n") });
      for (const secret of ["victim-SECRET-token", "app-password-SECRET", "internal-SECRET-value"]) {
        expect(out).not.toContain(secret);
      }
      expect(out).not.toMatch(/listed:/);
      expect(out).not.toMatch(/read:/);
    },
  );
});

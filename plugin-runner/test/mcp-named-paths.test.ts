import { execFileSync } from "node:child_process";
import {
  chmodSync,
  existsSync,
  mkdirSync,
  readFileSync,
  renameSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { onPath, pathWithoutBubblewrap, requires } from "@stavrobot/common/test-support";
import { bundleFixtureServer } from "./mcp/fixtures.js";
import { isRoot, makeTempRoot, startPluginHost, uniqueName, type TestPluginHost } from "./helpers.js";

/**
 * The paths an MCP server's declaration names, as the owner writes them for published servers:
 * an entry inside a `node_modules` install (its dependencies found above it) and the install's
 * `.bin` link, a folder it works in (writable, though the owner's), a read-only folder, a file
 * in a folder that does not exist yet, `cwd`. In every sandbox this machine has: what is named
 * works; with namespaces nothing else exists; with a user of its own it writes where it was
 * given, and only there; and what it was given is taken back when its declaration goes.
 */
const hasBwrap = onPath("bwrap");
const acl = onPath("setfacl");
const launchers = [
  ...(requires("namespaces by bubblewrap: bubblewrap is not installed", hasBwrap) ? ["bubblewrap"] : []),
  ...(requires("namespaces by util-linux unshare: needs root", isRoot) ? ["unshare"] : []),
  "plain",
] as const;

let root: string;
let install: string;
beforeAll(async () => {
  root = makeTempRoot("mcp-named");
  // A published server as npm installs it: its entry imports a dependency found in the install's
  // node_modules, and npm's .bin link points at the entry.
  install = join(root, "install");
  const pkg = join(install, "node_modules", "fixture-mcp");
  const dep = join(install, "node_modules", "fixture-dep");
  mkdirSync(join(pkg, "dist"), { recursive: true });
  mkdirSync(dep, { recursive: true });
  mkdirSync(join(install, "node_modules", ".bin"), { recursive: true });
  writeFileSync(join(install, "package.json"), '{"dependencies":{"fixture-mcp":"1.0.0"}}');
  writeFileSync(join(install, "stray.txt"), "beside the install, not in it");
  writeFileSync(join(dep, "package.json"), '{"name":"fixture-dep","type":"module","main":"index.js"}');
  writeFileSync(join(dep, "index.js"), 'export const marker = "dependency found";\n');
  writeFileSync(join(pkg, "package.json"), '{"name":"fixture-mcp","type":"module","bin":"dist/index.js"}');
  renameSync(await bundleFixtureServer(root), join(pkg, "dist", "server.mjs"));
  writeFileSync(
    join(pkg, "dist", "index.js"),
    '#!/usr/bin/env node\nimport { marker } from "fixture-dep";\nif (!marker) process.exit(3);\nawait import("./server.mjs");\n',
  );
  chmodSync(join(pkg, "dist", "index.js"), 0o755);
  symlinkSync("../fixture-mcp/dist/index.js", join(install, "node_modules", ".bin", "fixture-mcp"));
  execFileSync("chmod", ["-R", "a+rX", install]);
}, 60_000);

afterAll(() => {
  if (root) rmSync(root, { recursive: true, force: true });
});

describe.each(launchers)("paths an MCP server's declaration names (%s)", (launcher) => {
  const pkg = uniqueName("mcp-named");
  const bin = uniqueName("mcp-bin");
  const namespaces = launcher !== "plain";
  let host: TestPluginHost;
  let own: string;
  let file: string;
  const at = (...parts: string[]) => join(own, ...parts);

  beforeAll(async () => {
    own = join(root, launcher);
    mkdirSync(at("notes"), { recursive: true });
    mkdirSync(at("docs"), { recursive: true });
    mkdirSync(at("elsewhere"), { recursive: true });
    writeFileSync(at("notes", "hello.txt"), "the owner's note");
    writeFileSync(at("docs", "readme.txt"), "read me only");
    writeFileSync(at("elsewhere", "secret.txt"), "nobody named this");
    file = at("mcp-servers.json");
    writeFileSync(
      file,
      JSON.stringify({
        [pkg]: {
          command: "node",
          args: [
            join(install, "node_modules", "fixture-mcp", "dist", "index.js"),
            at("notes"),
            `--docs=${at("docs")}`,
          ],
          env: { FIXTURE_STATE: at("state", "new", "memory.jsonl") },
          cwd: at("notes"),
          readOnlyPaths: [at("docs")],
        },
        [bin]: {
          command: join(install, "node_modules", ".bin", "fixture-mcp"),
          args: [at("notes")],
          readOnly: true,
        },
      }),
    );
    host = await startPluginHost({
      root: at("host"),
      mcpServersFile: file,
      ...(launcher === "plain" ? { plainSandbox: true } : {}),
      ...(launcher === "unshare" ? { sandboxPath: pathWithoutBubblewrap() } : {}),
    });
  }, 60_000);

  afterAll(async () => {
    await host?.close();
    for (const name of [pkg, bin]) await host?.host.isolation.removeUser(name);
  });

  const run = async (plugin: string, tool: string, body: Record<string, unknown> = {}) =>
    (await host.request("POST", `/bundles/${plugin}/tools/${encodeURIComponent(tool)}/run`, body)).body as {
      success: boolean;
      output?: string;
      error?: string;
    };

  it("the sandbox is the one asked for", async () => {
    const health = (await host.request("GET", "/health")).body as {
      sandbox: { mode: string; tool?: string };
    };
    expect(health.sandbox.mode).toBe(namespaces ? "namespaces" : "plain");
    if (namespaces) expect(health.sandbox.tool).toBe(launcher);
  });

  it("a server inside a node_modules install starts: its dependencies are found above it", async () => {
    await vi.waitFor(
      async () => expect(await run(pkg, "cwd")).toEqual({ success: true, output: at("notes") }),
      {
        timeout: 30_000,
      },
    );
    // Through npm's .bin link too.
    await vi.waitFor(async () => expect((await run(bin, "whoami")).success).toBe(true), { timeout: 30_000 });
  });

  it("writes in the folder it was given, the owner's files there too; reads the read-only one", async () => {
    expect(await run(pkg, "read-file", { path: at("notes", "hello.txt") })).toEqual({
      success: true,
      output: "the owner's note",
    });
    expect((await run(pkg, "write-file", { path: at("notes", "made.txt"), text: "new" })).success).toBe(true);
    expect(readFileSync(at("notes", "made.txt"), "utf8")).toBe("new");
    expect((await run(pkg, "write-file", { path: at("notes", "hello.txt"), text: "changed" })).success).toBe(
      true,
    );
    expect(readFileSync(at("notes", "hello.txt"), "utf8")).toBe("changed");
    // The owner's folder stays the owner's.
    expect(statSync(at("notes")).uid).toBe(process.getuid?.());
    expect(await run(pkg, "read-file", { path: at("docs", "readme.txt") })).toEqual({
      success: true,
      output: "read me only",
    });
    if (namespaces || isRoot) {
      const refused = await run(pkg, "write-file", { path: at("docs", "x.txt"), text: "no" });
      expect(refused.success).toBe(false);
      expect(refused.error).toMatch(/EROFS|EACCES/);
      expect(existsSync(at("docs", "x.txt"))).toBe(false);
    }
  });

  it("a named file that does not exist yet: its folder is made and given to it", async () => {
    const path = at("state", "new", "memory.jsonl");
    expect((await run(pkg, "write-file", { path, text: '{"type":"entity"}\n' })).success).toBe(true);
    expect(readFileSync(path, "utf8")).toBe('{"type":"entity"}\n');
    const user = await host.host.isolation.lookupUser(pkg);
    if (user) expect(statSync(at("state", "new")).uid).toBe(user.uid);
  });

  it("its code stays read-only, and what is not named does not exist (namespaces)", async () => {
    if (namespaces || isRoot) {
      const code = await run(pkg, "write-file", {
        path: join(install, "node_modules", "fixture-dep", "index.js"),
        text: "overwritten",
      });
      expect(code.success).toBe(false);
    }
    if (!namespaces) return;
    for (const path of [at("elsewhere", "secret.txt"), join(install, "stray.txt")]) {
      const hidden = await run(pkg, "read-file", { path });
      expect(hidden.success).toBe(false);
      expect(hidden.error).toContain("ENOENT");
    }
  });

  it("readOnly = true: the folder it names is shown but not writable", async () => {
    expect((await run(bin, "read-file", { path: at("notes", "made.txt") })).output).toBe("new");
    if (namespaces || isRoot) {
      expect((await run(bin, "write-file", { path: at("notes", "bin.txt"), text: "no" })).success).toBe(
        false,
      );
      expect(existsSync(at("notes", "bin.txt"))).toBe(false);
    }
  });

  it.runIf(isRoot && acl)(
    "write access is an ACL entry for its user, taken back when its declaration goes",
    async () => {
      const user = await host.host.isolation.lookupUser(pkg);
      const entries = () => execFileSync("getfacl", ["-n", "-p", at("notes")], { encoding: "utf8" });
      expect(entries()).toContain(`user:${user?.uid}:rwx`);
      const declared = JSON.parse(readFileSync(file, "utf8")) as Record<string, unknown>;
      delete declared[pkg];
      writeFileSync(file, JSON.stringify(declared));
      await vi.waitFor(async () => expect((await host.request("GET", `/bundles/${pkg}`)).status).toBe(404), {
        timeout: 15_000,
      });
      await vi.waitFor(() => expect(entries()).not.toContain(`user:${user?.uid}:`), { timeout: 10_000 });
    },
  );
});

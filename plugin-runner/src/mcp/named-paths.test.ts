import { existsSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { mcpServerSchema, silentLogger } from "@stavrobot/common";
import { McpGrants } from "./grants.js";
import { namedMounts, namedPaths, pathsNamed } from "./named-paths.js";

let root: string;
beforeAll(() => {
  root = mkdtempSync(join(tmpdir(), "named-paths-"));
  mkdirSync(join(root, "app", "dist"), { recursive: true });
  writeFileSync(join(root, "app", "package.json"), "{}");
  writeFileSync(join(root, "app", "dist", "server.js"), "");
  mkdirSync(join(root, "tools", "bin"), { recursive: true });
  writeFileSync(join(root, "tools", "bin", "serve.py"), "");
  symlinkSync(join(root, "app", "dist", "server.js"), join(root, "tools", "bin", "link"));
  mkdirSync(join(root, "data"), { recursive: true });
  writeFileSync(join(root, "data", "notes.db"), "");
});
afterAll(() => rmSync(root, { recursive: true, force: true }));

const declare = (fields: Record<string, unknown>) => mcpServerSchema.parse({ command: "node", ...fields });

describe("the paths an MCP server's declaration names", () => {
  it("are found in command, args (after =), env values, cwd and readOnlyPaths; ~ and relative ones are not", () => {
    expect(
      pathsNamed(
        declare({
          command: "/opt/x/bin/run",
          args: ["--root=/srv/a/", "relative/b", "~/c", "/srv/d"],
          env: { A: "/srv/e", B: "plain" },
          cwd: "/srv/f",
          readOnlyPaths: ["/srv/g"],
        }),
      ),
    ).toEqual(["/opt/x/bin/run", "/srv/a", "/srv/d", "/srv/e", "/srv/f", "/srv/g"]);
  });

  it("a script brings its project read-only (or its own folder); a symlink its folder too; data is writable", async () => {
    const { paths } = await namedPaths(
      declare({
        args: [
          join(root, "app", "dist", "server.js"),
          join(root, "data"),
          join(root, "tools", "bin", "link"),
        ],
        env: { DB: join(root, "data", "notes.db"), PY: join(root, "tools", "bin", "serve.py") },
      }),
      "/nowhere",
    );
    expect(paths).toEqual([
      { kind: "code", path: join(root, "app") },
      { kind: "data", path: join(root, "data"), writable: true, directory: true },
      { kind: "data", path: join(root, "data", "notes.db"), writable: true, directory: false },
      { kind: "code", path: join(root, "tools", "bin") },
    ]);
    // Parents before what is inside them; code never writable.
    expect(namedMounts(paths).map((mount) => mount.writable)).toEqual([false, true, true, false]);
  });

  it("readOnly, and readOnlyPaths, keep data read-only", async () => {
    const all = await namedPaths(declare({ args: [join(root, "data")], readOnly: true }));
    expect(all.paths).toEqual([{ kind: "data", path: join(root, "data"), writable: false, directory: true }]);
    const some = await namedPaths(
      declare({
        args: [join(root, "data"), join(root, "data", "notes.db")],
        readOnlyPaths: [join(root, "data")],
      }),
    );
    expect(some.paths.every((named) => named.kind === "data" && !named.writable)).toBe(true);
  });

  it("a file that does not exist gets its folder; never a top-level or home folder, nor when read-only", async () => {
    const made = await namedPaths(
      declare({ env: { A: join(root, "state", "memory.jsonl"), B: join(root, "data", "new.json") } }),
    );
    expect(made.paths).toEqual([
      { kind: "folder", path: join(root, "data"), writable: true, exists: true },
      { kind: "folder", path: join(root, "state"), writable: true, exists: false },
    ]);
    const refused = await namedPaths(
      declare({
        env: { A: "/srv/memory.json", B: "/root/memory.json", C: "/home/ann/m.json", D: "/me/x/m.json" },
      }),
      "/me/x",
    );
    expect(refused.paths).toEqual([]);
    expect(refused.passed.map((passed) => passed.path)).toEqual([
      "/home/ann/m.json",
      "/me/x/m.json",
      "/root/memory.json",
      "/srv/memory.json",
    ]);
    expect(refused.passed[0]?.reason).toContain("name a file in a folder of its own");
    const readOnly = await namedPaths(declare({ env: { A: join(root, "state", "m.json") }, readOnly: true }));
    expect(readOnly.paths).toEqual([]);
  });

  it("system folders, / and the sandbox's own folders are never named", async () => {
    const { paths, passed } = await namedPaths(
      declare({ args: ["/", "/usr/bin/node", "/proc/self", "/tmp", "/plugins/other", "/etc/hosts"] }),
    );
    expect(paths).toEqual([]);
    expect(passed).toEqual([]);
  });
});

describe("write access without setfacl", () => {
  it("gives nothing, says which command would, and still makes a new file's folder", async () => {
    const warnings: unknown[] = [];
    const grants = new McpGrants(
      join(root, "grants.json"),
      { ...silentLogger, warn: (...args) => void warnings.push(args) },
      null,
    );
    const folder = join(root, "made", "here");
    await grants.prepare(
      "srv",
      [
        { kind: "folder", path: folder, writable: true, exists: false },
        { kind: "data", path: join(root, "data"), writable: true, directory: true },
      ],
      undefined,
    );
    expect(warnings).toEqual([]);
    expect(existsSync(folder)).toBe(true);
    await grants.prepare(
      "srv",
      [{ kind: "data", path: join(root, "data"), writable: true, directory: true }],
      { uid: 64000, gid: 64000 },
    );
    expect(JSON.stringify(warnings)).toContain("setfacl (Debian package acl) is not installed");
    expect(JSON.stringify(warnings)).toContain(`-R -m u:64000:rwX,d:u:64000:rwX ${join(root, "data")}`);
  });
});

import { chmodSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { SYSTEM_TOOL_PATH, toolPathFor } from "./tool-path.js";

describe("toolPathFor", () => {
  const root = mkdtempSync(join(tmpdir(), "tool-path-"));
  afterAll(() => rmSync(root, { recursive: true, force: true }));

  it("puts the launcher's own runtime directories first, then the system ones", () => {
    const localBin = join(root, "home", ".local", "bin");
    const elsewhere = join(root, "elsewhere");
    mkdirSync(localBin, { recursive: true });
    mkdirSync(elsewhere);
    writeFileSync(join(localBin, "uv"), "#!/bin/sh\n");
    chmodSync(join(localBin, "uv"), 0o755);
    writeFileSync(join(elsewhere, "not-a-runtime"), "#!/bin/sh\n", { mode: 0o755 });
    const path = toolPathFor(`${elsewhere}:${localBin}:/usr/bin:/bin`);
    expect(path.startsWith(`${localBin}:`)).toBe(true);
    expect(path).not.toContain(elsewhere);
    for (const dir of SYSTEM_TOOL_PATH.split(":")) expect(path.split(":")).toContain(dir);
  });

  it("is overridden by PLUGIN_TOOL_PATH", () => {
    expect(toolPathFor("/usr/bin", { PLUGIN_TOOL_PATH: "/opt/tools/bin" })).toBe("/opt/tools/bin");
  });
});

import { chmodSync, mkdirSync, mkdtempSync, rmSync, symlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { SYSTEM_TOOL_PATH, createLogger } from "@stavrobot/common";
import { requires } from "@stavrobot/common/test-support";
import { isRoot, startPythonRunner } from "./helpers.js";

/**
 * The plain sandbox as root runs scripts on this machine's own paths, as the run user: what it
 * finds on the PATH must be something that user can reach.
 */
describe.runIf(requires("run users: needs root", isRoot))("plain sandbox paths (root)", () => {
  const home = mkdtempSync(join(tmpdir(), "python-runner-home-"));
  afterAll(() => rmSync(home, { recursive: true, force: true }));

  it("skips a python3 shim the run user cannot reach for one it can, and says so", async () => {
    // A pyenv-style shim in a mode-700 home, first on the PATH; /usr/bin/python3 further on.
    const shims = join(home, ".pyenv", "shims");
    mkdirSync(shims, { recursive: true });
    symlinkSync("/usr/bin/python3", join(shims, "python3"));
    chmodSync(home, 0o700);
    const lines: string[] = [];
    const t = await startPythonRunner({
      plainSandbox: true,
      toolPath: `${shims}:${SYSTEM_TOOL_PATH}`,
      logger: createLogger("test", "info", (line) => lines.push(line)),
    });
    try {
      const { output } = await t.run({ code: "import sys, os\nprint(sys.executable, os.getuid() != 0)" });
      expect(output).not.toContain("Permission denied");
      expect(output).toMatch(/^\/usr\/(local\/)?bin\/python3 True\n$/);
      expect(lines.join("\n")).toContain(`the run user cannot pass through to ${shims}`);
    } finally {
      await t.close();
    }
  });

  it("does not call its own cache unreachable: the run user owns it", async () => {
    const lines: string[] = [];
    const t = await startPythonRunner({
      plainSandbox: true,
      logger: createLogger("test", "info", (line) => lines.push(line)),
    });
    await t.close();
    expect(lines.filter((line) => line.includes("cannot pass through"))).toEqual([]);
  });
});

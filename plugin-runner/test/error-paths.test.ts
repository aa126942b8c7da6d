import { readFileSync, realpathSync, rmSync } from "node:fs";
import { join, relative } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { TestPluginHost } from "./helpers.js";
import { sandboxModes, isRoot, startPluginHost, uniqueName, userExists, writePlugin } from "./helpers.js";
import { pluginUserName } from "../src/users.js";

/**
 * How the mount holding `path` names it in /proc/self/mountinfo (a bind mount's source is shown
 * relative to the root of its file system, so a path on a separate tmpfs is shown shortened).
 */
function mountinfoName(path: string): string {
  const real = realpathSync(path);
  let best = { root: "/", point: "/" };
  for (const line of readFileSync("/proc/self/mountinfo", "utf8").split("\n")) {
    const [, , , root, point] = line.split(" ");
    if (!root || !point) continue;
    const inside = real === point || real.startsWith(point === "/" ? "/" : `${point}/`);
    if (inside && point.length >= best.point.length) best = { root, point };
  }
  return join(best.root, relative(best.point, real));
}

/*
 * Error texts go to the model, and into the stored conversation: they must not carry where this
 * machine keeps the runner's temporary run directories and per-plugin caches. A failing tool
 * prints those host paths on stderr the only ways a tool can learn them: in plain mode its HOME
 * and uv cache are the real cache paths; in namespaces mode its /tmp/<plugin> is a bind mount
 * whose source /proc/self/mountinfo shows.
 */
describe.each(sandboxModes())("error texts of failed runs (%s sandbox)", (mode, plainSandbox) => {
  let t: TestPluginHost;
  const name = uniqueName("paths");

  beforeAll(async () => {
    t = await startPluginHost({ plainSandbox });
    writePlugin(t.pluginsDir, name, [
      {
        name: "env",
        script: `#!/bin/sh\ncat >/dev/null\necho "home=$HOME uv=$UV_CACHE_DIR" >&2\nexit 3\n`,
      },
      {
        name: "mounts",
        script:
          `#!/bin/sh\ncat >/dev/null\n` +
          `awk '$5 == "/tmp/${name}" { print "run dir: " $4 }' /proc/self/mountinfo >&2\nexit 3\n`,
      },
    ]);
  });

  afterAll(async () => {
    await t?.close();
    if (isRoot && userExists(pluginUserName(name))) await t.host.isolation.removeUser(name);
    if (t) rmSync(t.root, { recursive: true, force: true });
  });

  it.runIf(mode === "plain")("name the plugin's cache relative to the cache directory", async () => {
    const { body } = await t.request("POST", `/bundles/${name}/tools/env/run`, {});
    expect(body).toEqual({ success: false, error: `home=${name}/home uv=${name}/uv` });
  });

  it.runIf(mode === "namespaces")("name the run's directory without the runs directory", async (ctx) => {
    // Only meaningful where the mount shows the full host path (not a /tmp on a tmpfs of its own).
    if (mountinfoName(t.runsDir) !== t.runsDir) ctx.skip();
    const { body } = await t.request("POST", `/bundles/${name}/tools/mounts/run`, {});
    expect(body.success).toBe(false);
    expect(body.error).toMatch(new RegExp(`^run dir: ${name}-[0-9a-f-]{36}$`));
  });

  it("never carry the runner's temporary directories", async () => {
    for (const tool of ["env", "mounts"]) {
      const { body } = await t.request("POST", `/bundles/${name}/tools/${tool}/run`, {});
      expect(body.success).toBe(false);
      expect(body.error).not.toContain(t.runsDir);
      expect(body.error).not.toContain(t.cacheDir);
    }
  });
});

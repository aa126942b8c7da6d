import { rmSync } from "node:fs";
import { join } from "node:path";
import { afterAll, describe, expect, it, vi } from "vitest";
import { TURN_HEADER, silentLogger } from "@stavrobot/common";
import type { ServiceProcess } from "@stavrobot/common/test-support";
import { freePort, processesMatching, startServiceProcess } from "@stavrobot/common/test-support";
import { createIsolation, pluginUserName } from "../src/users.js";
import {
  sandboxModes,
  SECRET,
  isRoot,
  makeTempRoot,
  startFakeApp,
  uniqueName,
  userExists,
  writePlugin,
} from "./helpers.js";

/** The plugin-runner as `npm start` runs it: a real process, killed with SIGKILL mid-run. */
function startMain(root: string, port: number, appUrl: string, plain: boolean): Promise<ServiceProcess> {
  return startServiceProcess({
    entry: "plugin-runner/src/main.ts",
    port,
    env: {
      PLUGINS_DIR: join(root, "plugins"),
      PLUGIN_CACHE_DIR: join(root, "cache"),
      PLUGIN_RUNNER_STATE_DIR: join(root, "state"),
      PLUGIN_SANDBOX: plain ? "plain" : "auto",
      APP_INTERNAL_URL: appUrl,
      STAVROBOT_INTERNAL_SECRET: SECRET,
    },
  });
}

/*
 * In namespaces mode bubblewrap (--die-with-parent) takes the run down with the runner, so the
 * restart finds nothing left. In plain mode nothing does: the tool's processes outlive the
 * SIGKILLed runner, and only the start-up sweep of the plugin user's processes ends them. Without
 * per-plugin users (not root) plain mode cannot tell a plugin's processes from others, so that case
 * needs root.
 */
describe.each(sandboxModes())("an async run cut off by the runner's death (%s sandbox)", (mode, plain) => {
  const root = makeTempRoot("plugin-runner-crash");
  const name = uniqueName("crash");
  const marker = `stavrobot-crash-${name}`;
  const services: ServiceProcess[] = [];

  afterAll(async () => {
    for (const service of services) await service.stop("SIGKILL");
    if (isRoot && userExists(pluginUserName(name))) {
      const isolation = createIsolation({ enabled: true, logger: silentLogger });
      // A run a failed test left behind would keep the user from being removed.
      await isolation.killProcesses(name);
      await isolation.removeUser(name);
    }
    rmSync(root, { recursive: true, force: true });
    // Plain mode: the cut-off run's work directory in the real /tmp (emptied at its next run only).
    if (plain) rmSync(join("/tmp", name), { recursive: true, force: true });
  });

  it.runIf(isRoot || !plain)(
    "is reported as a failure after the restart, and leaves no process behind",
    async () => {
      const app = await startFakeApp();
      const port = await freePort();
      writePlugin(join(root, "plugins"), name, [
        {
          name: "long",
          script: `#!/bin/bash\ncat >/dev/null\n(exec -a ${marker}-detached sleep 600) &\nexec -a ${marker} sleep 600\n`,
          manifest: { async: true },
        },
      ]);
      const first = await startMain(root, port, app.url, plain);
      services.push(first);
      expect(await first.healthy()).toMatchObject({ sandbox: { mode } });
      // Started by the app's turn 77: the report of its loss goes back to that turn.
      const started = await fetch(`http://127.0.0.1:${port}/bundles/${name}/tools/long/run`, {
        method: "POST",
        headers: {
          Authorization: `Bearer ${SECRET}`,
          "Content-Type": "application/json",
          [TURN_HEADER]: "77",
        },
        body: "{}",
      });
      expect(started.status).toBe(202);
      await vi.waitFor(() => expect(processesMatching(marker).length).toBeGreaterThanOrEqual(2), 10_000);
      await first.stop("SIGKILL");
      if (plain) {
        // Nothing but the next start-up ends them: they are still there once the runner is gone.
        await new Promise((resolve) => setTimeout(resolve, 500));
        expect(processesMatching(marker).length).toBeGreaterThanOrEqual(2);
      }

      const second = await startMain(root, port, app.url, plain);
      services.push(second);
      await vi.waitFor(() => expect(app.messages).toHaveLength(1), 10_000);
      expect(app.messages[0]).toMatchObject({ source: `plugin:${name}/long`, turn: 77 });
      expect(app.messages[0]?.message).toMatch(
        new RegExp(`^The run of tool "long" \\(plugin "${name}"\\) failed:\\n`),
      );
      expect(app.messages[0]?.message).toContain("The plugin-runner restarted while");
      // Nothing of the cut-off run keeps running, detached or not.
      await vi.waitFor(() => expect(processesMatching(marker)).toEqual([]), 10_000);
      await second.stop();
      await app.close();
    },
  );
});

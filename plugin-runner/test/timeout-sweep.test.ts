import { rmSync } from "node:fs";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { processesMatching } from "@stavrobot/common/test-support";
import type { FakeApp, TestPluginHost } from "./helpers.js";
import {
  sandboxModes,
  isRoot,
  startFakeApp,
  startPluginHost,
  uniqueName,
  userExists,
  writePlugin,
} from "./helpers.js";
import { pluginUserName } from "../src/users.js";

/** Leaves its process group and session (setsid) with a marked process; optionally hangs. */
const escaper = (marker: string, hang: boolean) => `#!/bin/bash
cat >/dev/null
setsid bash -c 'exec -a ${marker} sleep 1000' </dev/null >/dev/null 2>&1 &
${hang ? "sleep 1000" : 'echo \'{"left": "a daemon"}\''}
`;

describe.runIf(isRoot).each(sandboxModes())(
  "processes a run leaves behind (root, %s sandbox)",
  (mode, plainSandbox) => {
    let t: TestPluginHost;
    let app: FakeApp;
    const name = uniqueName("sweep");
    const user = pluginUserName(name);
    const marker = `stavrobot-escaped-${name}`;

    beforeAll(async () => {
      app = await startFakeApp();
      t = await startPluginHost({
        appUrl: app.url,
        plainSandbox,
        limits: { syncTimeoutMs: 800, asyncTimeoutMs: 10_000, killGraceMs: 200 },
      });
      writePlugin(t.pluginsDir, name, [
        { name: "escaper", script: escaper(`${marker}-timeout`, true) },
        { name: "daemon", script: escaper(`${marker}-normal`, false) },
        {
          name: "healthy",
          script: "#!/bin/sh\ncat >/dev/null\nsleep 2.5\necho '{\"healthy\": true}'\n",
          manifest: { async: true },
        },
      ]);
    });

    afterAll(async () => {
      await t.close();
      await app.close();
      if (userExists(user)) {
        await t.host.isolation.killProcesses(name);
        await t.host.isolation.removeUser(name);
      }
      rmSync(t.root, { recursive: true, force: true });
    });

    it("ends a process that left the tool's process group when the tool times out", async () => {
      const { status, body } = await t.request("POST", `/bundles/${name}/tools/escaper/run`, {});
      expect(status).toBe(200);
      expect(body.error).toContain("Tool execution timed out");
      await t.host.settle();
      expect(processesMatching(`${marker}-timeout`)).toEqual([]);
    });

    it("ends a daemon a tool leaves behind when it exits normally", async () => {
      const { body } = await t.request("POST", `/bundles/${name}/tools/daemon/run`, {});
      expect(body).toEqual({ success: true, output: { left: "a daemon" } });
      await t.host.settle();
      expect(processesMatching(`${marker}-normal`)).toEqual([]);
    });

    it("never kills a concurrent, healthy run of the same plugin", async () => {
      const started = await t.request("POST", `/bundles/${name}/tools/healthy/run`, {});
      expect(started.status).toBe(202);
      if (mode === "namespaces") {
        // Runs are separate sandboxes: this one's leftovers end with it, the healthy run goes on.
        const timedOut = await t.request("POST", `/bundles/${name}/tools/escaper/run`, {});
        expect(timedOut.body.error).toContain("Tool execution timed out");
        await t.host.settle();
        // The kernel ends what is left in the run's PID namespace once its first process is gone;
        // on a busy machine `ps` can still list one that is being taken down.
        await vi.waitFor(() => expect(processesMatching(`${marker}-timeout`)).toEqual([]), 3_000);
      }
      await vi.waitFor(() => expect(app.messages).toHaveLength(1), 10_000);
      expect(app.messages[0]?.pluginResult).toEqual({
        plugin: name,
        tool: "healthy",
        outcome: { success: true, output: { healthy: true } },
      });
      await t.host.background.idle();
      await t.host.settle();
      expect(processesMatching(marker)).toEqual([]);
    });
  },
);

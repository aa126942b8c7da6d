import { chmodSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it, vi } from "vitest";
import {
  isRoot,
  machinePathWithout,
  requires,
  startFakeAnthropic,
  textTurn,
  toolTurn,
  uniqueName,
  type FakeLlmServer,
} from "@stavrobot/common/test-support";
import { removeSystemUser } from "@stavrobot/common";
import { pluginUserName } from "../../plugin-runner/src/users.js";
import { configFor, post } from "./helpers/app.js";
import { createTestDatabase, type TestDatabase } from "./helpers/db.js";
import { startAppProcess, type AppProcess } from "./helpers/process.js";

/**
 * A fresh machine as root: no bubblewrap, the checkout (and so the data directory) under a mode-700
 * home, and `python3` on the PATH a pyenv-style shim in that home. Plugin users cannot pass through
 * the home on this machine's paths; the sandbox must still let every plugin tool and `run_python`
 * work, and say which sandbox is in force.
 */
describe.runIf(requires("a fresh machine as root: per-plugin users need root", isRoot))(
  "npm start as root on a machine without bubblewrap, from a checkout in a mode-700 home",
  () => {
    let home: string | undefined;
    let database: TestDatabase | undefined;
    let fake: FakeLlmServer | undefined;
    let running: AppProcess | undefined;
    let plugin: string | undefined;

    afterEach(async () => {
      await running?.stop();
      // Its plugin's user is this machine's, not the test's.
      if (plugin) await removeSystemUser(pluginUserName(plugin));
      await fake?.close();
      await database?.drop();
      if (home) rmSync(home, { recursive: true, force: true });
    });

    it("runs plugin tools and run_python in namespaces made with util-linux unshare, and says so", async () => {
      home = mkdtempSync(join(tmpdir(), "closed-home-"));
      chmodSync(home, 0o700);
      // pyenv's layout: a shim on PATH calling an interpreter kept under the home.
      const version = join(home, ".pyenv", "versions", "3.11", "bin");
      const shims = join(home, ".pyenv", "shims");
      mkdirSync(version, { recursive: true });
      mkdirSync(shims, { recursive: true });
      symlinkSync("/usr/bin/python3", join(version, "python3"));
      writeFileSync(join(shims, "python3"), `#!/bin/sh\nexec "${version}/python3" "$@"\n`, { mode: 0o755 });
      const dataDir = join(home, "stavrobot", "data");
      plugin = uniqueName("closed");
      const tool = join(dataDir, "plugins", plugin, "greet");
      mkdirSync(tool, { recursive: true });
      writeFileSync(
        join(dataDir, "plugins", plugin, "manifest.json"),
        JSON.stringify({ name: plugin, description: "Greets." }),
      );
      writeFileSync(
        join(tool, "manifest.json"),
        JSON.stringify({
          name: "greet",
          description: "Greets someone.",
          entrypoint: "run.py",
          parameters: { name: { type: "string", description: "Who" } },
        }),
      );
      writeFileSync(
        join(tool, "run.py"),
        "#!/usr/bin/env python3\nimport json, os, sys\n" +
          'print(json.dumps({"greeting": "hello " + json.load(sys.stdin)["name"], "uid": os.getuid()}))\n',
        { mode: 0o755 },
      );

      fake = await startFakeAnthropic();
      database = await createTestDatabase();
      mkdirSync(join(dataDir, "main"), { recursive: true });
      // The plugin's result is outside text, so the trust gate would ask the owner before the later
      // run_python (app/test/trust.test.ts covers that); here only the sandbox is under test.
      writeFileSync(
        join(dataDir, "main", "config.toml"),
        configFor(fake, "anthropic", '[trust]\nallow = ["run_python"]\n'),
      );
      running = await startAppProcess({
        PATH: `${shims}:${machinePathWithout(["bwrap"])}`,
        HOME: home,
        TZ: "UTC",
        DATA_DIR: dataDir,
        ...database.env,
      });

      fake.enqueue(
        toolTurn("run_plugin_tool", { plugin, tool: "greet", parameters: JSON.stringify({ name: "Ada" }) }),
        textTurn("greeted"),
      );
      expect((await post(running.port, "/chat", { message: "greet Ada" })).body.response).toBe("greeted");
      const toolResult = fake.requests.at(-1)!.lastUserText;
      expect(toolResult).toContain("hello Ada");
      expect(toolResult).not.toContain("Permission denied");
      expect(toolResult).not.toMatch(/"uid":0\b/);

      fake.enqueue(
        toolTurn("run_python", { code: "import os\nprint(6 * 7, os.getuid() != 0)" }),
        textTurn("ran"),
      );
      expect((await post(running.port, "/chat", { message: "use python" })).body.response).toBe("ran");
      expect(fake.requests.at(-1)!.lastUserText).toContain("42 True");

      // The runners say which sandbox is in force and what it leaves open, at start and on /health.
      for (const port of [running.runnerPort, running.pythonRunnerPort]) {
        const health = (await (await fetch(`http://127.0.0.1:${port}/health`)).json()) as {
          sandbox: { mode: string; tool: string; reason: string; unprotected: string[] };
        };
        expect(health.sandbox).toMatchObject({
          mode: "namespaces",
          tool: "unshare",
          reason: "bubblewrap is not installed",
        });
        expect(health.sandbox.unprotected.length).toBeGreaterThan(0);
      }
      await vi.waitFor(() =>
        expect(running!.output()).toContain(
          "Sandbox: namespaces (util-linux unshare, since bubblewrap is not installed)",
        ),
      );
    }, 120_000);
  },
);

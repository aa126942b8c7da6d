import { rmSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { silentLogger } from "@stavrobot/common";
import { startFakeAnthropic, type FakeLlmServer } from "@stavrobot/common/test-support";
import { startApp, type RunningApp } from "../../../src/app.js";
import {
  SECRET,
  makeTempRoot,
  startGitDaemon,
  startPluginHost,
  uniqueName,
  type GitDaemon,
  type TestPluginHost,
} from "../../../../plugin-runner/test/helpers.js";
import { configFor, createTestEnv, type TestEnv } from "../../helpers/app.js";
import { freePort } from "../../helpers/process.js";
import { writePluginRepo } from "./plugin-repo.js";

/**
 * The admin fixture from the sources: the app and the plugin-runner in this process (startApp,
 * startPluginHost), not the bundles `npm start` runs. Kept only for the browser test of the MCP
 * servers until it runs the product (fixture.ts); it needs the runner's in-process host to remove
 * the servers' Unix users. Otherwise as fixture.ts: the fake LLM, a fresh database, and a git
 * daemon on loopback serving one plugin repository whose init script waits for a file named `go`.
 */
export interface SourcesAdminFixture {
  fake: FakeLlmServer;
  env: TestEnv;
  app: RunningApp;
  runner: TestPluginHost;
  daemon: GitDaemon;
  plugin: string;
  repoUrl: string;
  /** Lets the plugin's init script finish. */
  releaseInit(): void;
  /** Stops the plugin-runner (the app stays up, as when the runner crashed). */
  closeRunner(): Promise<void>;
  close(): Promise<void>;
}

export async function startSourcesAdminFixture(extraConfig = ""): Promise<SourcesAdminFixture> {
  const repos = makeTempRoot("ui-repos");
  const plugin = uniqueName("weather");
  writePluginRepo(join(repos, "weather"), plugin);
  const daemon = await startGitDaemon(repos);
  const fake = await startFakeAnthropic();
  const env = await createTestEnv(configFor(fake, "anthropic", extraConfig));
  const internalPort = await freePort();
  const runner = await startPluginHost({
    appUrl: `http://127.0.0.1:${internalPort}`,
    limits: { syncTimeoutMs: 30_000 },
    // Where the app writes the owner's MCP servers (beside its secret, beside config.toml here).
    mcpServersFile: join(dirname(env.env.CONFIG_PATH as string), "mcp-servers.json"),
  });
  const app = await startApp({
    env: {
      ...env.env,
      INTERNAL_PORT: String(internalPort),
      PLUGIN_RUNNER_URL: runner.url,
      PYTHON_RUNNER_URL: "http://127.0.0.1:9",
      STAVROBOT_INTERNAL_SECRET: SECRET,
    },
    logger: silentLogger,
  });
  let runnerClosed = false;
  return {
    fake,
    env,
    app,
    runner,
    daemon,
    plugin,
    repoUrl: daemon.url("weather"),
    releaseInit: () => writeFileSync(join(runner.pluginsDir, plugin, "go"), ""),
    async closeRunner() {
      runnerClosed = true;
      await runner.close();
    },
    async close() {
      await app.close();
      // A test may have closed the runner already (to see the app without it).
      if (!runnerClosed) {
        await runner.request("POST", "/remove", { name: plugin });
        await runner.close();
      }
      await daemon.stop();
      await fake.close();
      await env.cleanup();
      rmSync(repos, { recursive: true, force: true });
      rmSync(runner.root, { recursive: true, force: true });
    },
  };
}

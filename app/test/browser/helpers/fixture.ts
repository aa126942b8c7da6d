import { mkdirSync, rmSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { silentLogger } from "@stavrobot/common";
import { startFakeAnthropic, type FakeLlmServer } from "@stavrobot/common/test-support";
import { startApp, type RunningApp } from "../../../src/app.js";
import {
  SECRET,
  git,
  makeTempRoot,
  startGitDaemon,
  startPluginHost,
  uniqueName,
  type GitDaemon,
  type TestPluginHost,
} from "../../../../plugin-runner/test/helpers.js";
import { configFor, createTestEnv, type TestEnv } from "../../helpers/app.js";
import { freePort } from "../../helpers/process.js";

/**
 * Everything the admin UI talks to, for real: the app on a fresh database with the fake LLM, the
 * plugin-runner in-process (its async results reach the app's internal port), and a git daemon on
 * loopback serving one plugin repository whose init script waits for a file named `go`.
 */
export interface AdminFixture {
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

export async function startAdminFixture(extraConfig = ""): Promise<AdminFixture> {
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

function writePluginRepo(dir: string, name: string): void {
  const tool = (tool: string, description: string, script: string, extra: Record<string, unknown> = {}) => {
    mkdirSync(join(dir, tool), { recursive: true });
    writeFileSync(
      join(dir, tool, "manifest.json"),
      JSON.stringify({ name: tool, description, entrypoint: "run.sh", parameters: {}, ...extra }),
    );
    writeFileSync(join(dir, tool, "run.sh"), script, { mode: 0o755 });
  };
  mkdirSync(dir, { recursive: true });
  writeFileSync(
    join(dir, "manifest.json"),
    JSON.stringify({
      name,
      description: "Weather forecasts.",
      instructions: "Get an API key at https://weather.example.com <b>and</b> paste it below.",
      init: { entrypoint: "init.sh" },
      config: {
        api_key: { description: "Weather API key", required: true },
        units: { description: "metric or imperial", required: false, default: "metric" },
      },
    }),
  );
  writeFileSync(
    join(dir, "init.sh"),
    "#!/bin/sh\nwhile [ ! -e go ]; do sleep 0.05; done\necho 'weather data downloaded'\n",
    { mode: 0o755 },
  );
  tool("forecast", "Forecast for a city.", '#!/bin/sh\necho \'{"forecast": "sunny"}\'\n');
  tool("radar", "Slow radar scan.", "#!/bin/sh\necho rain\n", { async: true });
  git(dir, "init", "-q", "-b", "main");
  git(dir, "add", "-A");
  git(dir, "commit", "-q", "-m", "weather");
}

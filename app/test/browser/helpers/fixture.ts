import { rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { JsonRequest } from "@stavrobot/common/test-support";
import { startFakeAnthropic, type FakeLlmServer } from "@stavrobot/common/test-support";
import {
  makeTempRoot,
  startGitDaemon,
  uniqueName,
  type GitDaemon,
} from "../../../../plugin-runner/test/helpers.js";
import { configFor, createTestEnv, type TestEnv } from "../../helpers/app.js";
import { startProduct, type Product } from "../../helpers/product.js";
import { writePluginRepo } from "./plugin-repo.js";

/**
 * Everything the admin UI talks to, as people run it: `npm start` (the bundles, their siblings
 * started by its launcher) on a fresh database with the fake LLM, and a git daemon on loopback
 * serving one plugin repository whose init script waits for a file named `go`. The test reaches
 * the product only as a person or a sibling would: its ports, the plugin-runner's API with the
 * internal secret, its log, the data directory.
 */
export interface AdminFixture {
  fake: FakeLlmServer;
  env: TestEnv;
  app: Product;
  /** The plugin-runner's API (the internal secret), as the app calls it. */
  runner: JsonRequest;
  /** The runner's plugins directory, where an owner drops a plugin: `plugins/` in the data directory. */
  pluginsDir: string;
  daemon: GitDaemon;
  plugin: string;
  repoUrl: string;
  /** Lets the plugin's init script finish. */
  releaseInit(): void;
  /** Removes the plugins a test installed (their Unix users are this machine's), then stops all. */
  close(): Promise<void>;
}

/** `extraConfig` goes at the end of config.toml; `env` is added to `npm start`'s variables. */
export async function startAdminFixture(
  extraConfig = "",
  options: { env?: NodeJS.ProcessEnv } = {},
): Promise<AdminFixture> {
  const repos = makeTempRoot("ui-repos");
  const plugin = uniqueName("weather");
  writePluginRepo(join(repos, "weather"), plugin);
  const daemon = await startGitDaemon(repos);
  const fake = await startFakeAnthropic();
  const env = await createTestEnv(configFor(fake, "anthropic", extraConfig));
  const app = await startProduct(env, options.env ? { env: options.env } : {});
  const pluginsDir = join(env.dir, "plugins");
  return {
    fake,
    env,
    app,
    runner: app.runner,
    pluginsDir,
    daemon,
    plugin,
    repoUrl: daemon.url("weather"),
    releaseInit: () => writeFileSync(join(pluginsDir, plugin, "go"), ""),
    async close() {
      await app.runner("POST", "/remove", { name: plugin });
      await app.stop();
      await daemon.stop();
      await fake.close();
      await env.cleanup();
      rmSync(repos, { recursive: true, force: true });
    },
  };
}

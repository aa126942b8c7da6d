import { runService } from "@stavrobot/common";
import { hostConfig, hostEnvSchema } from "./config.js";
import { createPluginHost } from "./host.js";
import { buildRoutes, healthOf } from "./server.js";

await runService({
  name: "plugin-runner",
  env: hostEnvSchema,
  // The service's own files are private; the modes it gives plugins are always set explicitly.
  umask: 0o077,
  async build({ env, secret, logger }) {
    const config = hostConfig(env);
    const host = createPluginHost({ ...config, secret, logger });
    await host.start();
    logger.info("plugins", { dir: config.pluginsDir, sandbox: host.sandbox.mode });
    return {
      router: buildRoutes(host.deps),
      health: () => healthOf(host.deps),
      stop: () => host.stop(),
    };
  },
});

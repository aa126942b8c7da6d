import { runService } from "@stavrobot/common";
import { pythonRunnerConfig, pythonRunnerEnvSchema } from "./config.js";
import { buildRoutes } from "./routes.js";
import { PythonRunner } from "./runner.js";

await runService({
  name: "python-runner",
  env: pythonRunnerEnvSchema,
  // The service's own files are private; the modes it gives the run user are set explicitly.
  umask: 0o077,
  async build({ env, logger }) {
    const { timeoutMs, ...config } = pythonRunnerConfig(env);
    const runner = await PythonRunner.create({ ...config, limits: { timeoutMs }, logger });
    return {
      router: buildRoutes(runner),
      health: () => ({ ...runner.status() }),
      stop: () => runner.settle(),
    };
  },
});

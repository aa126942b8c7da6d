import { runService } from "@stavrobot/common";
import { startBridge } from "./bridge.js";
import { bridgeConfig, bridgeEnvSchema } from "./config.js";

await runService({
  name: "signal-bridge",
  env: bridgeEnvSchema,
  // Messages, attachments and the account's keys are the owner's alone.
  umask: 0o077,
  async build({ env, secret, logger }) {
    const config = bridgeConfig(env);
    const bridge = await startBridge({ config, secret, logger });
    logger.info("bridging Signal", { account: config.account, signalCli: config.signalCliPath });
    return { router: bridge.router, health: bridge.health, stop: () => bridge.stop() };
  },
});

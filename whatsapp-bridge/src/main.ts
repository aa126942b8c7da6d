import { runService } from "@stavrobot/common";
import { baileysSockets } from "./baileys-socket.js";
import { startBridge } from "./bridge.js";
import { bridgeConfig, bridgeEnvSchema } from "./config.js";

await runService({
  name: "whatsapp-bridge",
  env: bridgeEnvSchema,
  // The session's keys and the messages are the owner's alone.
  umask: 0o077,
  async build({ env, secret, logger }) {
    const config = bridgeConfig(env);
    const bridge = await startBridge({
      config,
      secret,
      logger,
      socketFactory: (authDir) => baileysSockets(authDir, { version: config.version, logger }),
    });
    logger.info("bridging WhatsApp", { state: bridge.connection.current });
    return { router: bridge.router, health: bridge.health, stop: () => bridge.stop() };
  },
});

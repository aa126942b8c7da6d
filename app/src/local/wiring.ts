import { createServiceClient, type Logger, type ServiceClient } from "@stavrobot/common";
import type { AppEnv } from "../boot/env.js";
import { checkedIfOwn, type OwnSiblings } from "./own-sibling.js";
import { wakingClient } from "./sibling.js";

/** The sibling services' clients: behind the internal secret, checked to be this app's own. */
export interface Siblings {
  pluginRunner: ServiceClient;
  pythonRunner: ServiceClient;
  coder: ServiceClient;
  /** Made only when Signal is configured. */
  signalBridge: () => ServiceClient;
  /** Made only when WhatsApp is configured. */
  whatsappBridge: () => ServiceClient;
}

export function wireSiblings(options: {
  settings: Pick<
    AppEnv,
    "PLUGIN_RUNNER_URL" | "PYTHON_RUNNER_URL" | "CODER_URL" | "SIGNAL_BRIDGE_URL" | "WHATSAPP_BRIDGE_URL"
  >;
  internalSecret: string;
  /** Siblings `npm start` runs from their first use, by name: called before each request to one. */
  wake?: Readonly<Record<string, () => Promise<void>>> | undefined;
  /** The siblings `npm start` started for this app: each is checked to be its own before use. */
  own?: OwnSiblings | undefined;
  logger: Logger;
}): Siblings {
  const { settings, internalSecret, logger } = options;
  const sibling = (name: string, baseUrl: string) =>
    wakingClient(
      checkedIfOwn(
        createServiceClient({
          baseUrl,
          bearer: internalSecret,
          timeoutMs: 60_000,
          logger: logger.child(name),
        }),
        name,
        options.own,
      ),
      options.wake?.[name],
    );
  return {
    pluginRunner: sibling("plugin-runner", settings.PLUGIN_RUNNER_URL),
    pythonRunner: sibling("python-runner", settings.PYTHON_RUNNER_URL),
    coder: sibling("coder", settings.CODER_URL),
    signalBridge: () => sibling("signal-bridge", settings.SIGNAL_BRIDGE_URL),
    whatsappBridge: () => sibling("whatsapp-bridge", settings.WHATSAPP_BRIDGE_URL),
  };
}

import { resolve } from "node:path";
import { z } from "zod";

/** `2.3000.1023223821`: WhatsApp Web's version as three numbers. */
const VERSION_PATTERN = /^\d+\.\d+\.\d+$/;

/** The bridge's own variables (the skeleton adds HOST, the internal secret and the log level). */
export const bridgeEnvSchema = z.object({
  PORT: z.coerce.number().int().min(0).max(65535).default(8082),
  /** The session's keys, the outbox and temporary files. */
  WHATSAPP_BRIDGE_STATE_DIR: z.string().min(1).default("data/whatsapp-bridge"),
  /**
   * WhatsApp Web's version to announce instead of the one Baileys ships with (`[whatsapp] version`
   * in config.toml): for when WhatsApp answers 405, "outdated version".
   */
  WHATSAPP_VERSION: z
    .string()
    .regex(VERSION_PATTERN, "three numbers such as 2.3000.1023223821")
    .optional()
    .or(z.literal("").transform(() => undefined)),
  APP_INTERNAL_URL: z.url().default("http://127.0.0.1:3001"),
});

export type BridgeEnv = z.infer<typeof bridgeEnvSchema>;

export interface BridgeConfig {
  /** Absolute; holds `auth/` (the session), `outbox/` and `tmp/`. */
  stateDir: string;
  version: [number, number, number] | undefined;
  appInternalUrl: string;
}

/** Resolves the parsed environment into the bridge's configuration (relative paths against the cwd). */
export function bridgeConfig(env: BridgeEnv): Readonly<BridgeConfig> {
  return Object.freeze({
    stateDir: resolve(env.WHATSAPP_BRIDGE_STATE_DIR),
    version: env.WHATSAPP_VERSION
      ? (env.WHATSAPP_VERSION.split(".").map(Number) as [number, number, number])
      : undefined,
    appInternalUrl: env.APP_INTERNAL_URL,
  });
}

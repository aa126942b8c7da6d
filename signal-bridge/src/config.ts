import { join, resolve } from "node:path";
import { z } from "zod";
import { e164Schema } from "@stavrobot/common";

/** The bridge's own variables (the skeleton adds HOST, the internal secret and the log level). */
export const bridgeEnvSchema = z.object({
  PORT: z.coerce.number().int().min(0).max(65535).default(8081),
  /** The bot's own Signal number, registered or linked with signal-cli beforehand. */
  SIGNAL_ACCOUNT: e164Schema,
  SIGNAL_CLI_PATH: z.string().min(1).default("signal-cli"),
  SIGNAL_CLI_CONFIG_DIR: z.string().min(1).default("data/signal-cli"),
  SIGNAL_CLI_HTTP_PORT: z.coerce.number().int().min(1).max(65535).default(8080),
  SIGNAL_BRIDGE_STATE_DIR: z.string().min(1).default("data/signal-bridge"),
  APP_INTERNAL_URL: z.url().default("http://127.0.0.1:3001"),
});

export type BridgeEnv = z.infer<typeof bridgeEnvSchema>;

export interface BridgeConfig {
  account: string;
  signalCliPath: string;
  /** Absolute; signal-cli's data directory (`--config`), holding the account and `attachments/`. */
  signalCliConfigDir: string;
  /** signal-cli's HTTP daemon listens on loopback at this port; nothing else should. */
  signalCliHttpPort: number;
  /** Absolute; the outbox, temporary outgoing attachments and signal-cli's pid file live here. */
  stateDir: string;
  appInternalUrl: string;
}

/** Resolves the parsed environment into the bridge's configuration (relative paths against the cwd). */
export function bridgeConfig(env: BridgeEnv): Readonly<BridgeConfig> {
  return Object.freeze({
    account: env.SIGNAL_ACCOUNT,
    signalCliPath: env.SIGNAL_CLI_PATH,
    signalCliConfigDir: resolve(env.SIGNAL_CLI_CONFIG_DIR),
    signalCliHttpPort: env.SIGNAL_CLI_HTTP_PORT,
    stateDir: resolve(env.SIGNAL_BRIDGE_STATE_DIR),
    appInternalUrl: env.APP_INTERNAL_URL,
  });
}

/** The daemon command line: the bot's account, new identities trusted, HTTP on loopback only. */
export function signalCliArgs(config: BridgeConfig): string[] {
  return [
    ...["--config", config.signalCliConfigDir, "-a", config.account],
    ...["--trust-new-identities", "always", "daemon"],
    ...["--http", `127.0.0.1:${config.signalCliHttpPort}`],
    ...["--receive-mode", "on-start", "--send-read-receipts"],
  ];
}

/** Where signal-cli stores received attachments, each named by the `id` it reports. */
export function attachmentsDir(config: BridgeConfig): string {
  return join(config.signalCliConfigDir, "attachments");
}

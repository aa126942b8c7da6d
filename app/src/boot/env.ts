import { z } from "zod";
import { parseEnv } from "@stavrobot/common";

const port = (fallback: number) => z.coerce.number().int().min(0).max(65535).default(fallback);

/**
 * Every environment variable the app reads, parsed once at start-up (a wrong value stops it with
 * exit code 78, naming the variable). config.toml holds everything else.
 */
export const appEnvSchema = z.object({
  DATA_DIR: z.string().min(1).default("data"),
  CONFIG_PATH: z.string().min(1).optional(),
  PORT: port(3000),
  INTERNAL_PORT: port(3001),
  HOST: z.string().min(1).default("127.0.0.1"),
  INTERNAL_HOST: z.string().min(1).optional(),
  PLUGIN_RUNNER_URL: z.url().default("http://127.0.0.1:3003"),
  PYTHON_RUNNER_URL: z.url().default("http://127.0.0.1:3004"),
  CODER_URL: z.url().default("http://127.0.0.1:3002"),
  SIGNAL_BRIDGE_URL: z.url().default("http://127.0.0.1:8081"),
  WHATSAPP_BRIDGE_URL: z.url().default("http://127.0.0.1:8082"),
  STAVROBOT_INTERNAL_SECRET_FILE: z.string().min(1).optional(),
  /** Where the app writes the owner's MCP servers for the plugin-runner (default: beside the internal secret). */
  MCP_SERVERS_FILE: z.string().min(1).optional(),
  TZ: z.string().optional(),
  /** Where backups go (`npm run backup`, and the app's own of the embedded database). */
  BACKUP_DIR: z.string().min(1).optional(),
  /** Time between the embedded database's backups by the running app; 0: none (as pg-backup's). */
  BACKUP_INTERVAL_SECONDS: z.coerce.number().int().min(0).default(86_400),
  /** Time between the embedding index's passes (with `[embeddings]`). */
  EMBEDDINGS_INTERVAL_SECONDS: z.coerce.number().min(0.1).max(3600).default(10),
  /** Where prepared embedded databases are kept (read by db/database.ts; default in node_modules' cache). */
  PGLITE_TEMPLATE_DIR: z.string().min(1).optional(),
});

export type AppEnv = z.infer<typeof appEnvSchema>;

export function parseAppEnv(env: NodeJS.ProcessEnv): AppEnv {
  return parseEnv("app", appEnvSchema, env);
}

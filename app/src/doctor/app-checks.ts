import { errorMessage } from "@stavrobot/common";
import type { Queryable } from "../db/database.js";
import type { AppStatus } from "../web/status.js";
import { backupCheck, diskCheck, formatBytes, summarise, type Check, type Checked } from "./checks.js";

export interface AppCheckDeps {
  db: Queryable;
  /** The embedded database (PGlite) rather than a server. */
  embedded: boolean;
  dataDir: string;
  backupDir: string;
  backupIntervalSeconds: number;
  /** The home page's status: siblings' health and each configured channel's state. */
  status: () => Promise<AppStatus>;
  provider: () => Promise<Check>;
  /** `[embeddings]`: one small call when configured, what it adds when not. */
  embeddings?: () => Promise<Check>;
  /** Why config.toml's last change could not be used for the MCP servers (while it cannot). */
  mcpConfigProblem?: () => string | undefined;
  /** The configured channels' checks, read from their parts of the status. */
  channelChecks: (channels: AppStatus["channels"]) => Check[];
}

/**
 * Everything the running app can check about itself, at once: the database, each sibling and the
 * sandbox it runs, the provider and its key, each configured channel, disk space, backups.
 */
export async function appChecks(deps: AppCheckDeps): Promise<Checked> {
  const [database, status, provider, embeddings, disk, backups] = await Promise.all([
    databaseCheck(deps),
    deps.status(),
    deps.provider(),
    deps.embeddings?.(),
    diskCheck(deps.dataDir),
    backupCheck(deps.backupDir, deps.backupIntervalSeconds),
  ]);
  return summarise([
    database,
    ...status.services.map((service): Check =>
      service.ok
        ? // Answering but not doing its job (the signal-bridge without signal-cli): a look.
          service.warning
          ? {
              name: service.name,
              state: "warn",
              detail: `${service.warning}${service.detail ? `: ${service.detail}` : ""}`,
            }
          : { name: service.name, state: "ok", detail: service.detail ?? "up" }
        : {
            name: service.name,
            state: "fail",
            detail: `does not answer: ${service.detail ?? "no reason given"}`,
            fix: "npm start restarts it by itself; if it keeps failing, its log says why.",
          },
    ),
    ...status.services.flatMap((service): Check[] =>
      service.mcpServersFailing?.length
        ? [
            {
              name: "mcp servers",
              state: "fail",
              detail: `failing: ${service.mcpServersFailing.join(", ")}`,
              fix: service.mcpServersFailing.some((name) => name.endsWith("(needs sign-in)"))
                ? "Press Connect on its card on the Plugins page to sign in again; the Plugins page shows each one's last error (correct its [mcpServers.<name>] in config.toml)."
                : "The Plugins page shows each one's last error; correct its [mcpServers.<name>] in config.toml.",
            },
          ]
        : [],
    ),
    ...mcpConfigChecks(deps.mcpConfigProblem?.()),
    provider,
    ...(embeddings ? [embeddings] : []),
    ...deps.channelChecks(status.channels),
    disk,
    backups,
  ]);
}

function mcpConfigChecks(problem: string | undefined): Check[] {
  if (!problem) return [];
  return [
    {
      name: "mcp servers config",
      state: "fail",
      detail: problem,
      fix: "Correct [mcpServers] in config.toml (or set the variable it names in the app's environment and restart); it is read again as soon as it changes.",
    },
  ];
}

async function databaseCheck(deps: AppCheckDeps): Promise<Check> {
  const kind = deps.embedded ? "embedded database (PGlite)" : "PostgreSQL server";
  try {
    const { rows } = await deps.db.query<{ size: string | number }>(
      "SELECT pg_database_size(current_database()) AS size",
    );
    return { name: "database", state: "ok", detail: `${kind}, ${formatBytes(Number(rows[0]?.size ?? 0))}` };
  } catch (error) {
    return {
      name: "database",
      state: "fail",
      detail: `${kind}: ${errorMessage(error)}`,
      fix: deps.embedded
        ? "Restart the app; if it keeps failing, restore the last backup (npm run restore)."
        : "Start PostgreSQL, or check DATABASE_URL.",
    };
  }
}

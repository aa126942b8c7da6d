import { errorMessage, type ServiceClient } from "@stavrobot/common";
import type { Channel } from "../audience.js";
import type { ChannelStatus, SiblingHealth } from "../channels/channel.js";
import type { Queryable } from "../db/database.js";

/**
 * What the home page shows (`GET /api/status`): the siblings' health, the channels, the queue and
 * message counts. Every part is gathered at once and a part that fails says so in its own place,
 * so one service being down never hides the others.
 */
export interface AppStatus {
  startedAt: string;
  uptimeSeconds: number;
  services: ServiceHealth[];
  /** Each channel's own part (`channels/<name>/`): `{configured: false}` or its state. */
  channels: Record<Channel, ChannelStatus>;
  queue: QueueStatus;
  messages: { total: number; bySource: { source: string; count: number }[] };
}

export interface ServiceHealth {
  name: string;
  ok: boolean;
  /** e.g. how the plugin-runner isolates plugins, or why the service did not answer. */
  detail?: string;
}

export interface QueueStatus {
  busy: boolean;
  currentInboxId: number | null;
  /** Messages accepted and waiting for their turn. */
  waiting: number;
  /** Unfinished inbox entries by status (`pending`, `processing`, `steered`, …). */
  open: Record<string, number>;
}

export interface StatusDeps {
  db: Queryable;
  queue: { readonly busy: boolean; readonly currentEntryId: number | undefined };
  /** The siblings this configuration uses, by name. */
  services: Readonly<Record<string, ServiceClient>>;
  /** Every channel's part, given the siblings' health (a channel in a sidecar is as up as it). */
  channels: (siblings: Promise<readonly SiblingHealth[]>) => Promise<Record<Channel, ChannelStatus>>;
  startedAt: Date;
  now?: () => Date;
}

const HEALTH_TIMEOUT_MS = 3_000;

export async function collectStatus(deps: StatusDeps): Promise<AppStatus> {
  const now = deps.now?.() ?? new Date();
  const siblings = Promise.all(Object.entries(deps.services).map(([name, client]) => health(name, client)));
  const [services, channels, queue, messages] = await Promise.all([
    siblings,
    deps.channels(siblings),
    queueStatus(deps),
    messageCounts(deps.db),
  ]);
  return {
    startedAt: deps.startedAt.toISOString(),
    uptimeSeconds: Math.max(0, Math.floor((now.getTime() - deps.startedAt.getTime()) / 1000)),
    services,
    channels,
    queue,
    messages,
  };
}

async function health(name: string, client: ServiceClient): Promise<ServiceHealth> {
  try {
    const { data } = await client.request("GET", "/health", { timeoutMs: HEALTH_TIMEOUT_MS, retries: 0 });
    const sandbox = (data as { sandbox?: { mode?: unknown; users?: unknown } } | undefined)?.sandbox;
    const detail =
      typeof sandbox?.mode === "string"
        ? `sandbox: ${sandbox.mode}${sandbox.users === true ? ", per-plugin users" : ""}`
        : undefined;
    return { name, ok: true, ...(detail ? { detail } : {}) };
  } catch (error) {
    return { name, ok: false, detail: errorMessage(error) };
  }
}

async function queueStatus(deps: StatusDeps): Promise<QueueStatus> {
  const { rows } = await deps.db.query<{ status: string; n: number | string }>(
    `SELECT status, count(*) AS n FROM inbox WHERE status NOT IN ('done', 'failed')
     GROUP BY status ORDER BY status`,
  );
  const open = Object.fromEntries(rows.map((row) => [row.status, Number(row.n)]));
  return {
    busy: deps.queue.busy,
    currentInboxId: deps.queue.currentEntryId ?? null,
    waiting: open.pending ?? 0,
    open,
  };
}

/**
 * Messages received, in total and by where they came from: `console` for the CLI without a source,
 * and one entry per kind of source (`plugin:weather/forecast` counts as `plugin`).
 */
async function messageCounts(db: Queryable): Promise<AppStatus["messages"]> {
  const { rows } = await db.query<{ source: string; n: number | string }>(
    `SELECT coalesce(split_part(source, ':', 1), 'console') AS source, count(*) AS n
     FROM inbox GROUP BY 1 ORDER BY 2 DESC, 1`,
  );
  const bySource = rows.map((row) => ({ source: row.source, count: Number(row.n) }));
  return { total: bySource.reduce((sum, entry) => sum + entry.count, 0), bySource };
}

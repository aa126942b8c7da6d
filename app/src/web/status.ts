import { errorMessage, type ServiceClient } from "@stavrobot/common";
import type { Channel } from "../audience.js";
import type { ChannelStatus, SiblingHealth } from "../channels/channel.js";
import type { Queryable } from "../db/database.js";
import { DeliveryStore, type DeliveryBacklog } from "../delivery/store.js";

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

/** A sibling as the page shows it: whether it answered, and how it isolates or why it did not. */
export type ServiceHealth = Omit<SiblingHealth, "body">;

export interface QueueStatus {
  busy: boolean;
  currentInboxId: number | null;
  /** Messages accepted and waiting for their turn. */
  waiting: number;
  /** Unfinished inbox entries by status (`pending`, `processing`, `steered`, …). */
  open: Record<string, number>;
  /** Outgoing channel messages: waiting to be sent (and why, when failing), given up lately. */
  deliveries: DeliveryBacklog;
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
    // What each sibling's /health said stays here: the page shows whether it answered, and why not.
    services: services.map(({ body: _body, ...service }) => service),
    channels,
    queue,
    messages,
  };
}

async function health(name: string, client: ServiceClient): Promise<SiblingHealth> {
  try {
    const { data } = await client.request("GET", "/health", { timeoutMs: HEALTH_TIMEOUT_MS, retries: 0 });
    const body = data as
      | {
          sandbox?: { mode?: unknown; users?: unknown };
          signalCli?: unknown;
          whatsapp?: unknown;
          problem?: unknown;
          mcpServersFailing?: { name?: unknown; signIn?: unknown }[];
        }
      | undefined;
    const failing = Array.isArray(body?.mcpServersFailing)
      ? body.mcpServersFailing.map(
          // A server whose OAuth sign-in lapsed says so (Home and the doctor show these names).
          (server) => `${String(server?.name)}${server?.signIn === "needed" ? " (needs sign-in)" : ""}`,
        )
      : [];
    // The signal-bridge answers while its signal-cli may not run: up, but sending nothing.
    const signalCli =
      typeof body?.signalCli === "string" && body.signalCli !== "running" ? body.signalCli : undefined;
    // The whatsapp-bridge answers while WhatsApp may not be open: up, but sending nothing.
    const whatsapp =
      typeof body?.whatsapp === "string" && body.whatsapp !== "open" ? body.whatsapp : undefined;
    const details = [
      typeof body?.sandbox?.mode === "string"
        ? `sandbox: ${body.sandbox.mode}${body.sandbox.users === true ? ", per-plugin users" : ""}`
        : undefined,
      signalCli ? (typeof body?.problem === "string" ? body.problem : `signal-cli: ${signalCli}`) : undefined,
      whatsapp ? (typeof body?.problem === "string" ? body.problem : `WhatsApp: ${whatsapp}`) : undefined,
      failing.length > 0 ? `MCP servers failing: ${failing.join(", ")} (see the Plugins page)` : undefined,
    ].filter((detail) => detail !== undefined);
    return {
      name,
      ok: true,
      ...(details.length > 0 ? { detail: details.join("; ") } : {}),
      ...(failing.length > 0 ? { mcpServersFailing: failing } : {}),
      ...(signalCli ? { warning: `bridge up, signal-cli ${signalCli}` } : {}),
      ...(whatsapp ? { warning: `bridge up, WhatsApp ${whatsapp}` } : {}),
      body: data,
    };
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
    deliveries: await new DeliveryStore(deps.db).backlog(),
  };
}

/**
 * Messages received, in total and by where they came from: `cli` for the owner's terminal,
 * and one entry per kind of source (`plugin:weather/forecast` counts as `plugin`).
 */
async function messageCounts(db: Queryable): Promise<AppStatus["messages"]> {
  const { rows } = await db.query<{ source: string; n: number | string }>(
    `SELECT coalesce(split_part(source, ':', 1), 'cli') AS source, count(*) AS n
     FROM inbox GROUP BY 1 ORDER BY 2 DESC, 1`,
  );
  const bySource = rows.map((row) => ({ source: row.source, count: Number(row.n) }));
  return { total: bySource.reduce((sum, entry) => sum + entry.count, 0), bySource };
}

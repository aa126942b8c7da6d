import { errorMessage, type Logger } from "@stavrobot/common";
import type { Database, Queryable } from "../db/database.js";
import { EmbeddingsError, MAX_BATCH_INPUTS, type EmbeddingsClient } from "./client.js";
import { syncChunks } from "./sources.js";
import { liveIdentity, setLiveIdentity } from "./state.js";
import type { VectorIndexes, VectorIndexState } from "./vector-index.js";

export interface IndexProgress {
  identity: string;
  /** The identity db_search compares with (differs from `identity` while a rebuild runs). */
  live: string | undefined;
  ok: number;
  waiting: number;
  rejected: number;
  empty: number;
  /** Why indexing is stopped or failing now, in words for the owner. */
  problem: string | undefined;
  /** Whether vectors are searched through pgvector's index, or compared in the app and why. */
  vectorIndex?: VectorIndexState;
}

interface DueRow {
  id: number;
  content: string;
  content_hash: string;
  attempts: number;
}

/** The longest wait before a row the provider could not take (no answer, 5xx, 429) is tried again. */
const MAX_BACKOFF_MS = 60 * 60_000;
/** Vectors written in one transaction. */
const WRITES_PER_TRANSACTION = 16;
/** After a setup error (key, URL, model), the worker tries again after this. */
const SETUP_PAUSE_MS = 5 * 60_000;

/**
 * Keeps `embedding_chunks` up to date in the background: every interval it brings the chunks of
 * the configured identity up to date with the tables, then embeds what waits in batches. A batch
 * the provider refuses is split until the refused row is alone, and that row is marked
 * `rejected`; a batch that fails otherwise waits with a growing backoff. All its state is in the
 * database, so a restart resumes where it stopped. It never holds a connection during a call,
 * so a turn never waits for it. When the identity changed, the new rows are built beside the
 * old and replace them once none waits.
 */
export class EmbeddingsWorker {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;
  private stopped = false;
  private readonly abort = new AbortController();
  private pausedUntil = 0;
  private problem: string | undefined;
  private nextUserMessageId = 0;
  private swept = false;

  constructor(
    private readonly deps: {
      db: Database;
      client: EmbeddingsClient;
      logger: Logger;
      intervalMs?: number;
      batchSize?: number;
      /** User messages looked at in one pass of the sync (tests make it small). */
      turnsPerPass?: number;
      /** Batches embedded in one cycle at most, so a first build shares the machine. */
      batchesPerCycle?: number;
      /** Told after each pass: what searches keep of the index may be stale (`VectorCache`). */
      changed?: () => void;
      /** The vector index, kept for the identities in use after each pass (where pgvector is). */
      indexes?: VectorIndexes;
    },
  ) {}

  start(): void {
    if (this.timer || this.stopped) return;
    const tick = () => {
      this.running = this.cycle()
        .catch((error: unknown) => {
          if (!this.stopped)
            this.deps.logger.warn("embedding index cycle failed", { error: errorMessage(error) });
        })
        .finally(() => {
          this.running = undefined;
          if (!this.stopped) this.timer = setTimeout(tick, this.deps.intervalMs ?? 10_000);
        });
    };
    // The first pass an interval after the start: the first turns come first.
    this.timer = setTimeout(tick, this.deps.intervalMs ?? 10_000);
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.abort.abort();
    if (this.timer) clearTimeout(this.timer);
    await this.running;
  }

  /** One pass: sync, embed what is due, swap a finished rebuild in. Tests call it directly. */
  async cycle(): Promise<void> {
    try {
      await this.pass();
    } finally {
      this.deps.changed?.();
    }
  }

  private async pass(): Promise<void> {
    const { db, client } = this.deps;
    const identity = client.identity;
    const live = await liveIdentity(db);
    if (live === undefined || (live !== identity && !(await hasRows(db, live)))) {
      await setLiveIdentity(db, identity);
    }
    if ((await liveIdentity(db)) === identity) {
      // A rebuild given up (the model changed back before it finished) leaves no rows behind.
      await db.query("DELETE FROM embedding_chunks WHERE identity <> $1", [identity]);
    }
    if (!this.swept) {
      // Turns whose messages are gone (a subagent removed) leave no chunk; checked once a start.
      await db.query(
        `DELETE FROM embedding_chunks c WHERE c.source = 'turn' AND NOT EXISTS (SELECT 1 FROM messages m WHERE m.id = c.source_id)`,
      );
      this.swept = true;
    }
    // The history in passes; the next cycle starts at the oldest turn still running, else after
    // the last one seen.
    let cursor = this.nextUserMessageId;
    let firstOpen: number | undefined;
    for (;;) {
      const synced = await syncChunks(db, identity, {
        fromUserMessageId: cursor,
        turnsOnly: cursor !== this.nextUserMessageId,
        ...(this.deps.turnsPerPass !== undefined ? { turnsPerPass: this.deps.turnsPerPass } : {}),
      });
      firstOpen ??= synced.firstOpenId;
      if (synced.lastId !== undefined) cursor = synced.lastId + 1;
      if (!synced.full || this.stopped) break;
    }
    this.nextUserMessageId = firstOpen ?? cursor;
    if (Date.now() >= this.pausedUntil) {
      const perCycle = this.deps.batchesPerCycle ?? 50;
      for (let batch = 0; batch < perCycle && !this.stopped; batch++) {
        const due = await dueRows(db, identity, this.deps.batchSize ?? MAX_BATCH_INPUTS);
        if (due.length === 0) break;
        if (!(await this.embedBatch(due))) break;
      }
    }
    if ((await liveIdentity(db)) !== identity && !(await hasWaiting(db, identity)) && !this.stopped) {
      await db.transaction(async (tx) => {
        await setLiveIdentity(tx, identity);
        await tx.query("DELETE FROM embedding_chunks WHERE identity <> $1", [identity]);
      });
      this.deps.logger.info("the rebuilt embedding index replaced the old one", { identity });
    }
    if (this.deps.indexes && !this.stopped) {
      const inUse = [identity, (await liveIdentity(db)) ?? identity];
      // Without its index a search compares in the app: indexing goes on regardless.
      await this.deps.indexes.maintain(inUse).catch((error: unknown) => {
        this.deps.logger.warn("could not keep the vector index", { error: errorMessage(error) });
      });
    }
  }

  /** Embeds rows; false when the provider cannot be used now (the cycle stops). */
  private async embedBatch(rows: DueRow[]): Promise<boolean> {
    const { db, client, logger } = this.deps;
    let vectors: Float32Array[];
    try {
      vectors = await client.embed(
        rows.map((row) => row.content),
        "document",
        this.abort.signal,
      );
    } catch (error) {
      if (this.stopped) return false;
      if (error instanceof EmbeddingsError && error.kind === "refused") {
        if (rows.length === 1) {
          const row = rows[0] as DueRow;
          await db.query(
            "UPDATE embedding_chunks SET status = 'rejected', last_error = $3 WHERE id = $1 AND content_hash = $2",
            [row.id, row.content_hash, error.message],
          );
          logger.warn("the embeddings provider refused one text; it stays found by its words only", {
            chunk: row.id,
            error: error.message,
          });
          return true;
        }
        const half = Math.ceil(rows.length / 2);
        return (await this.embedBatch(rows.slice(0, half))) && (await this.embedBatch(rows.slice(half)));
      }
      const message = errorMessage(error);
      if (this.problem !== message) logger.warn("could not index for search by meaning", { error: message });
      this.problem = message;
      if (error instanceof EmbeddingsError && error.kind === "setup") {
        this.pausedUntil = Date.now() + SETUP_PAUSE_MS;
      } else {
        for (const row of rows) {
          const wait = Math.min(10_000 * 2 ** row.attempts, MAX_BACKOFF_MS);
          await db.query(
            `UPDATE embedding_chunks SET attempts = attempts + 1, last_error = $2,
               next_attempt_at = now() + $3 * interval '1 millisecond' WHERE id = $1`,
            [row.id, message, wait],
          );
        }
      }
      return false;
    }
    this.problem = undefined;
    // A few rows a transaction: with the vector index each write costs more (its graph is kept),
    // and the embedded database runs one transaction at a time, so a turn's statements go between.
    for (let start = 0; start < rows.length; start += WRITES_PER_TRANSACTION) {
      await this.writeVectors(rows.slice(start, start + WRITES_PER_TRANSACTION), vectors.slice(start));
    }
    return true;
  }

  private async writeVectors(rows: DueRow[], vectors: Float32Array[]): Promise<void> {
    await this.deps.db.transaction(async (tx) => {
      for (const [index, row] of rows.entries()) {
        const vector = vectors[index] as Float32Array;
        const zero = vector.every((value) => value === 0);
        // Written only if the text is still the one embedded (a memory edited meanwhile waits again).
        await tx.query(
          zero
            ? "UPDATE embedding_chunks SET status = 'rejected', last_error = $3 WHERE id = $1 AND content_hash = $2"
            : `UPDATE embedding_chunks SET status = 'ok', embedding = $3::real[], embedded_at = now(), last_error = NULL
               WHERE id = $1 AND content_hash = $2`,
          [
            row.id,
            row.content_hash,
            zero ? "the provider answered a vector of zeros" : vectorLiteral(vector),
          ],
        );
      }
    });
  }

  async progress(): Promise<IndexProgress> {
    const progress = await indexProgress(this.deps.db, this.deps.client.identity, this.problem);
    return this.deps.indexes ? { ...progress, vectorIndex: this.deps.indexes.current() } : progress;
  }
}

export async function indexProgress(
  db: Queryable,
  identity: string,
  problem?: string,
): Promise<IndexProgress> {
  const counts = await db.query<{ status: string; n: number }>(
    "SELECT status, count(*)::int AS n FROM embedding_chunks WHERE identity = $1 GROUP BY status",
    [identity],
  );
  const of = (status: string) => counts.rows.find((row) => row.status === status)?.n ?? 0;
  return {
    identity,
    live: await liveIdentity(db),
    ok: of("ok"),
    waiting: of("pending"),
    rejected: of("rejected"),
    empty: of("empty"),
    problem,
  };
}

export function vectorLiteral(vector: Float32Array): string {
  return `{${Array.from(vector, (value) => String(value)).join(",")}}`;
}

async function dueRows(db: Queryable, identity: string, limit: number): Promise<DueRow[]> {
  const result = await db.query<DueRow>(
    `SELECT id, content, content_hash, attempts FROM embedding_chunks
     WHERE identity = $1 AND status = 'pending' AND next_attempt_at <= now() ORDER BY id LIMIT $2`,
    [identity, limit],
  );
  return result.rows;
}

async function hasRows(db: Queryable, identity: string): Promise<boolean> {
  const result = await db.query(
    "SELECT 1 FROM embedding_chunks WHERE identity = $1 AND status = 'ok' LIMIT 1",
    [identity],
  );
  return result.rows.length > 0;
}

async function hasWaiting(db: Queryable, identity: string): Promise<boolean> {
  const result = await db.query(
    "SELECT 1 FROM embedding_chunks WHERE identity = $1 AND status = 'pending' LIMIT 1",
    [identity],
  );
  return result.rows.length > 0;
}

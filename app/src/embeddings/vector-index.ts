import { createHash } from "node:crypto";
import { errorMessage, type Logger } from "@stavrobot/common";
import type { Database, Queryable } from "../db/database.js";
import type { ChunkSource } from "./sources.js";

/**
 * The index of vectors where the database has pgvector (0.8 or newer): the embedded database
 * always (PGlite's pgvector package), a server where the extension is installed. One HNSW index
 * per identity, partial (`WHERE identity = …`), over each vector's binary quantization (one bit a
 * dimension, compared by Hamming distance); a search takes the index's nearest candidates and
 * orders them by their exact cosine similarity. Over full vectors, PGlite's HNSW took 34 ms to
 * insert a row and 70–140 ms to search 5,000; over bits 1.4 ms and 13–17 ms (DECISIONLOG.md).
 * Where there is no pgvector, search.ts compares the newest chunks in the app instead.
 */
const INDEX_PREFIX = "embedding_chunks_ann_";
/** Candidates the index brings for the exact comparison. */
export const ANN_CANDIDATES = 200;
/** pgvector's first version with iterative index scans (a filtered search still fills its page). */
const MINIMUM_VERSION = [0, 8];

export type VectorIndexState =
  { kind: "unchecked" } | { kind: "available"; version: string } | { kind: "unavailable"; reason: string };

export interface Neighbour {
  id: number;
  source: ChunkSource;
  source_id: number;
  source_at: Date | string;
  content: string;
  content_hash: string;
  similarity: number;
}

/** The index's name for an identity and a dimension: a digest, since identities hold any text. */
export function indexName(identity: string, dimensions: number): string {
  const digest = createHash("sha256").update(identity).digest("hex").slice(0, 12);
  return `${INDEX_PREFIX}${digest}_${dimensions}`;
}

/** A string as an SQL literal: partial indexes are matched by the query's own text, not parameters. */
function literal(text: string): string {
  return `'${text.replaceAll("'", "''")}'`;
}

/** The conditions an indexed row meets, in the index and, word for word, in each search. */
function indexedRows(identity: string, dimensions: number): string {
  return `identity = ${literal(identity)} AND status = 'ok' AND array_length(embedding, 1) = ${dimensions}`;
}

function bits(column: string, dimensions: number): string {
  return `binary_quantize(${column}::vector(${dimensions}))::bit(${dimensions})`;
}

export class VectorIndexes {
  private state: VectorIndexState = { kind: "unchecked" };
  private preparing: Promise<VectorIndexState> | undefined;
  /** Index names present, as read at the last `maintain`. */
  private present = new Set<string>();

  constructor(
    private readonly db: Database,
    private readonly logger: Logger,
  ) {}

  /** Whether pgvector can be used, and why not; checked once (the extension made where it can be). */
  prepare(): Promise<VectorIndexState> {
    this.preparing ??= this.check().then((state) => {
      this.state = state;
      if (state.kind === "unavailable")
        this.logger.info("search by meaning compares vectors in the app (no vector index)", {
          reason: state.reason,
        });
      return state;
    });
    return this.preparing;
  }

  current(): VectorIndexState {
    return this.state;
  }

  private async check(): Promise<VectorIndexState> {
    try {
      const installed = await this.db.query<{ extversion: string }>(
        "SELECT extversion FROM pg_extension WHERE extname = 'vector'",
      );
      if (installed.rows.length === 0) await this.db.query("CREATE EXTENSION IF NOT EXISTS vector");
      const version = (
        await this.db.query<{ extversion: string }>(
          "SELECT extversion FROM pg_extension WHERE extname = 'vector'",
        )
      ).rows[0]?.extversion;
      if (version === undefined) return { kind: "unavailable", reason: "pgvector could not be enabled" };
      const [major = 0, minor = 0] = version.split(".").map(Number);
      const [needMajor = 0, needMinor = 0] = MINIMUM_VERSION;
      if (major < needMajor || (major === needMajor && minor < needMinor))
        return {
          kind: "unavailable",
          reason: `the database's pgvector is ${version}; the index needs ${MINIMUM_VERSION.join(".")} or newer`,
        };
      return { kind: "available", version };
    } catch (error) {
      return { kind: "unavailable", reason: `the database has no pgvector (${errorMessage(error)})` };
    }
  }

  /**
   * After a pass of the worker: each identity in use gets its index once it has a vector (built
   * over the rows it has, then kept by PostgreSQL as rows are written); indexes of identities no
   * longer in use are dropped.
   */
  async maintain(identities: readonly string[]): Promise<void> {
    if ((await this.prepare()).kind !== "available") return;
    const existing = new Set(
      (
        await this.db.query<{ indexname: string }>(
          "SELECT indexname FROM pg_indexes WHERE tablename = 'embedding_chunks' AND indexname LIKE $1",
          [`${INDEX_PREFIX}%`],
        )
      ).rows.map((row) => row.indexname),
    );
    const wanted = new Set<string>();
    for (const identity of new Set(identities)) {
      const dimensions = await dimensionsOf(this.db, identity);
      if (dimensions === undefined) continue;
      const name = indexName(identity, dimensions);
      wanted.add(name);
      if (existing.has(name)) continue;
      const started = performance.now();
      await this.db.query(
        `CREATE INDEX IF NOT EXISTS ${name} ON embedding_chunks
         USING hnsw ((${bits("embedding", dimensions)}) bit_hamming_ops) WHERE ${indexedRows(identity, dimensions)}`,
      );
      existing.add(name);
      this.logger.info("made the vector index for search by meaning", {
        identity,
        dimensions,
        ms: Math.round(performance.now() - started),
      });
    }
    for (const name of existing) {
      if (wanted.has(name)) continue;
      await this.db.query(`DROP INDEX IF EXISTS ${name}`);
      existing.delete(name);
    }
    this.present = existing;
  }

  /** Whether a search of `identity` with vectors of `dimensions` goes through the index. */
  covers(identity: string, dimensions: number): boolean {
    return this.state.kind === "available" && this.present.has(indexName(identity, dimensions));
  }

  /**
   * The chunks of a conversation nearest to `vector` (unit length): the index's nearest by their
   * bits, then ordered by exact cosine similarity; only those more alike than unrelated.
   */
  async nearest(
    identity: string,
    agentId: number,
    vector: Float32Array,
    limit: number,
  ): Promise<Neighbour[]> {
    const dimensions = vector.length;
    const query = `[${Array.from(vector, String).join(",")}]`;
    return this.db.transaction(async (tx) => {
      // A filtered search (one conversation of several) goes on through the graph until it has
      // its candidates, in roughly the index's order; the exact comparison orders them.
      // Both settings in one prepared statement, and the rows with the neighbours: each statement
      // is a trip, and recall runs before every turn.
      await tx.query(
        `SELECT set_config('hnsw.iterative_scan', 'relaxed_order', true), set_config('hnsw.ef_search', '${ANN_CANDIDATES}', true)`,
        [],
        { prepare: true },
      );
      const result = await tx.query<Neighbour>(
        `SELECT id, source, source_id, source_at, content, content_hash, similarity FROM (
           SELECT id, source, source_id, source_at, content, content_hash,
             1 - (embedding::vector(${dimensions}) <=> $1::vector(${dimensions})) AS similarity
           FROM embedding_chunks
           WHERE ${indexedRows(identity, dimensions)} AND agent_id = $2
           ORDER BY ${bits("embedding", dimensions)} <~> ${bits("$1", dimensions)}
           LIMIT ${ANN_CANDIDATES}
         ) candidates WHERE similarity > 0 ORDER BY similarity DESC, id DESC LIMIT $3`,
        [query, agentId, limit],
        // Its text varies only with the identity and the dimensions, fixed while they are in use.
        { prepare: true },
      );
      return result.rows.map((row) => ({ ...row, similarity: Number(row.similarity) }));
    });
  }
}

async function dimensionsOf(db: Queryable, identity: string): Promise<number | undefined> {
  const result = await db.query<{ n: number | null }>(
    "SELECT array_length(embedding, 1) AS n FROM embedding_chunks WHERE identity = $1 AND status = 'ok' ORDER BY id DESC LIMIT 1",
    [identity],
  );
  const n = result.rows[0]?.n;
  return n === null || n === undefined ? undefined : Number(n);
}

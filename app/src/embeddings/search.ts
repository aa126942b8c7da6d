import { errorMessage } from "@stavrobot/common";
import type { Queryable } from "../db/database.js";
import type { EmbeddingsClient } from "./client.js";
import type { ChunkSource } from "./sources.js";
import { liveIdentity } from "./state.js";
import type { VectorIndexes } from "./vector-index.js";

/**
 * Without a vector index (a server without pgvector), the newest chunks of a conversation compared
 * by vector at one search, exact cosine in the app; older ones are still found by their words.
 */
export const VECTOR_SEARCH_CAP = 10_000;
/** How long a search waits for its query's vector. */
const QUERY_TIMEOUT_MS = 15_000;
/** Results each leg (words, meaning) brings to the fusion. */
const LEG_RESULTS = 50;
/** Reciprocal rank fusion's constant: a result's score is the sum over legs of 1 / (k + rank). */
export const RRF_K = 60;
/** MMR's weight of relevance against likeness to what is already chosen. */
const MMR_LAMBDA = 0.7;

export interface SearchHit {
  id: number;
  source: ChunkSource;
  sourceId: number;
  at: Date;
  content: string;
  score: number;
  /** Cosine similarity to the query, when the search by meaning took part and found it. */
  similarity?: number;
}

export interface FusedResult {
  hits: SearchHit[];
  /** Said with the results: why the search by meaning did not take part, when it did not. */
  note: string | undefined;
}

interface Candidate {
  id: number;
  source: ChunkSource;
  source_id: number;
  source_at: Date | string;
  content: string;
  content_hash: string;
}

/**
 * Vectors read once and kept, by chunk id and text: a search reads only the ones it lacks. It
 * also keeps the live identity and each conversation's newest chunks (the vector leg's scope)
 * until the index's worker says it changed them (`invalidate`, after each of its passes).
 */
export class VectorCache {
  private readonly vectors = new Map<number, { hash: string; vector: Float32Array }>();
  private readonly scopes = new Map<string, { id: number; content_hash: string }[]>();
  private live: Promise<string | undefined> | undefined;

  /** The index changed: the identity and the scopes are read again at the next search. */
  invalidate(): void {
    this.scopes.clear();
    this.live = undefined;
  }

  liveIdentity(db: Queryable): Promise<string | undefined> {
    this.live ??= liveIdentity(db).catch((error: unknown) => {
      this.live = undefined;
      throw error;
    });
    return this.live;
  }

  /** The newest `ok` chunks of a conversation under the identity, at most VECTOR_SEARCH_CAP. */
  async scope(
    db: Queryable,
    identity: string,
    agentId: number,
  ): Promise<{ id: number; content_hash: string }[]> {
    const key = `${identity}\n${agentId}`;
    const kept = this.scopes.get(key);
    if (kept) return kept;
    const rows = (
      await db.query<{ id: number; content_hash: string }>(
        `SELECT id, content_hash FROM embedding_chunks
         WHERE identity = $1 AND agent_id = $2 AND status = 'ok' ORDER BY source_at DESC, id DESC LIMIT $3`,
        [identity, agentId, VECTOR_SEARCH_CAP],
        { prepare: true },
      )
    ).rows;
    this.scopes.set(key, rows);
    return rows;
  }

  async load(
    db: Queryable,
    rows: { id: number; content_hash: string }[],
  ): Promise<Map<number, Float32Array>> {
    const missing = rows
      .filter((row) => this.vectors.get(row.id)?.hash !== row.content_hash)
      .map((row) => row.id);
    if (this.vectors.size + missing.length > 2 * VECTOR_SEARCH_CAP) this.vectors.clear();
    for (let start = 0; start < missing.length; start += 2_000) {
      const result = await db.query<{ id: number; content_hash: string; embedding: string }>(
        "SELECT id, content_hash, embedding::text AS embedding FROM embedding_chunks WHERE id = ANY($1::int[]) AND status = 'ok'",
        [missing.slice(start, start + 2_000)],
        { prepare: true },
      );
      for (const row of result.rows)
        this.vectors.set(row.id, { hash: row.content_hash, vector: parseVector(row.embedding) });
    }
    const out = new Map<number, Float32Array>();
    for (const row of rows) {
      const kept = this.vectors.get(row.id);
      if (kept?.hash === row.content_hash) out.set(row.id, kept.vector);
    }
    return out;
  }
}

function parseVector(text: string): Float32Array {
  return Float32Array.from(text.slice(1, -1).split(","), Number);
}

/** A tsquery matching any of the query's words, stemmed (English): one missing word loses nothing. */
const ANY_WORD_QUERY =
  "regexp_replace(plainto_tsquery('english', $1)::text, ' (&|<[0-9-]+>) ', ' | ', 'g')::tsquery";

/**
 * db_search's search when embeddings are configured: full text (any word, stemmed) and vectors
 * over the live identity's chunks of one conversation, fused by reciprocal rank (k = 60), then
 * diversified by MMR, the newer first where scores tie. Undefined before the index's first pass
 * (the caller searches the messages by their words, as without embeddings).
 */
export async function fusedSearch(
  deps: { db: Queryable; client: EmbeddingsClient; cache: VectorCache; index?: VectorIndexes },
  query: string,
  agentId: number,
  limit: number,
): Promise<FusedResult | undefined> {
  const { db, client, cache, index } = deps;
  const live = await cache.liveIdentity(db);
  if (live === undefined) return undefined;
  // The query's vector is asked for at once, while the words are searched.
  const queryVector =
    live === client.identity
      ? client.embed([query], "query", AbortSignal.timeout(QUERY_TIMEOUT_MS)).then(
          ([vector]) => ({ vector: vector as Float32Array }),
          (error: unknown) => ({ error }),
        )
      : undefined;
  const words = await db.query<Candidate & { rank: number }>(
    // The query's words are parsed and stemmed once (MATERIALIZED), not again for each row.
    `WITH q AS MATERIALIZED (SELECT ${ANY_WORD_QUERY} AS query)
     SELECT id, source, source_id, source_at, content, content_hash, ts_rank(words, q.query) AS rank
     FROM embedding_chunks, q
     WHERE identity = $2 AND agent_id = $3 AND status <> 'empty' AND words @@ q.query
     ORDER BY rank DESC, source_at DESC, id DESC LIMIT $4`,
    [query, live, agentId, LEG_RESULTS],
    { prepare: true },
  );
  const candidates = new Map<number, Candidate>(words.rows.map((row) => [row.id, row]));
  const lists: number[][] = [words.rows.map((row) => row.id)];
  let vectors = new Map<number, Float32Array>();
  const similarities = new Map<number, number>();
  let note: string | undefined;
  if (!queryVector) {
    note = "the index is being rebuilt for the new embedding model: this search went by words only.";
  } else {
    try {
      // A search waits for the provider a short while only; then it goes by words.
      const asked = await queryVector;
      if ("error" in asked) throw asked.error;
      const indexed = index?.covers(live, asked.vector.length) === true;
      let nearest: { id: number; similarity: number }[];
      if (index && indexed) {
        // The index's neighbours come with their rows.
        const neighbours = await index.nearest(live, agentId, asked.vector, LEG_RESULTS);
        for (const row of neighbours) if (!candidates.has(row.id)) candidates.set(row.id, row);
        nearest = neighbours;
      } else {
        ({ vectors, nearest } = await nearestInApp(db, cache, live, agentId, asked.vector, LEG_RESULTS));
      }
      lists.push(nearest.map((entry) => entry.id));
      for (const entry of nearest) similarities.set(entry.id, entry.similarity);
      const lacking = nearest.map((entry) => entry.id).filter((id) => !candidates.has(id));
      if (lacking.length > 0) {
        const rows = await db.query<Candidate>(
          "SELECT id, source, source_id, source_at, content, content_hash FROM embedding_chunks WHERE id = ANY($1::int[])",
          [lacking],
          { prepare: true },
        );
        for (const row of rows.rows) candidates.set(row.id, row);
      }
      // Through the index, only the candidates' own vectors are read (for the diversity below).
      if (indexed) vectors = await cache.load(db, [...candidates.values()]);
    } catch (error) {
      note = `search by meaning is unavailable right now (${errorMessage(error)}): this search went by words only.`;
    }
  }
  const fused = reciprocalRankFusion(lists)
    .filter((entry) => candidates.has(entry.id))
    .map((entry) => {
      const row = candidates.get(entry.id) as Candidate;
      return {
        id: row.id,
        source: row.source,
        sourceId: row.source_id,
        at: new Date(row.source_at),
        content: row.content,
        score: entry.score,
        ...(similarities.has(row.id) ? { similarity: similarities.get(row.id) as number } : {}),
      };
    });
  return { hits: diversify(fused, vectors, limit), note };
}

/**
 * Without the index: the conversation's newest chunks (VECTOR_SEARCH_CAP) compared exactly with
 * `query` in the app, the `limit` most alike (more alike than unrelated) first, and the vectors read.
 */
export async function nearestInApp(
  db: Queryable,
  cache: VectorCache,
  identity: string,
  agentId: number,
  query: Float32Array,
  limit: number,
): Promise<{ vectors: Map<number, Float32Array>; nearest: { id: number; similarity: number }[] }> {
  const vectors = await cache.load(db, await cache.scope(db, identity, agentId));
  const nearest = [...vectors.entries()]
    .map(([id, vector]) => ({ id, similarity: dot(query, vector) }))
    .filter((entry) => entry.similarity > 0)
    .sort((a, b) => b.similarity - a.similarity)
    .slice(0, limit);
  return { vectors, nearest };
}

/** Each id's summed 1 / (k + rank) over the ranked lists (rank from 1), best first. */
export function reciprocalRankFusion(
  lists: readonly (readonly number[])[],
  k = RRF_K,
): { id: number; score: number }[] {
  const scores = new Map<number, number>();
  for (const list of lists)
    list.forEach((id, index) => scores.set(id, (scores.get(id) ?? 0) + 1 / (k + index + 1)));
  return [...scores.entries()].map(([id, score]) => ({ id, score })).sort((a, b) => b.score - a.score);
}

/**
 * Maximal marginal relevance: each next result is the one whose relevance, less its likeness to
 * the results already chosen, is highest (so five copies of one fact do not fill the page); the
 * newer wins a tie.
 */
export function diversify<T extends { id: number; at: Date; score: number }>(
  ranked: readonly T[],
  vectors: ReadonlyMap<number, Float32Array>,
  limit: number,
): T[] {
  const top = ranked[0]?.score ?? 1;
  const left = [...ranked];
  const chosen: T[] = [];
  while (chosen.length < limit && left.length > 0) {
    let best = 0;
    let bestValue = -Infinity;
    left.forEach((candidate, index) => {
      const own = vectors.get(candidate.id);
      let likeness = 0;
      if (own)
        for (const picked of chosen) {
          const other = vectors.get(picked.id);
          if (other) likeness = Math.max(likeness, dot(own, other));
        }
      const value = MMR_LAMBDA * (candidate.score / top) - (1 - MMR_LAMBDA) * likeness;
      const current = left[best] as T;
      if (
        value > bestValue + 1e-12 ||
        (Math.abs(value - bestValue) <= 1e-12 && candidate.at.getTime() > current.at.getTime())
      ) {
        best = index;
        bestValue = value;
      }
    });
    chosen.push(...left.splice(best, 1));
  }
  return chosen;
}

function dot(a: Float32Array, b: Float32Array): number {
  if (a.length !== b.length) return 0;
  let sum = 0;
  for (let i = 0; i < a.length; i++) sum += (a[i] as number) * (b[i] as number);
  return sum;
}

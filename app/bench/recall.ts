/**
 * Recall (BENCH_ONLY=recall): a generated history of 200 turns with 20 planted facts, indexed by
 * the real worker against the fake embeddings server (whose vectors put synonyms together: no
 * model weights can be downloaded here), then 20 questions asking for the facts in other words.
 * Prints recall@5 of full text alone, vectors alone and the fused search (the product's), the
 * time recall adds before a turn (p50 / p95 of `recall`), and the bytes it adds to a turn, each
 * with vectors compared in the app (a server without pgvector) and through pgvector's index (the
 * embedded database). Then the two ways at scale: 20,000 chunks of 1,536 dimensions written
 * straight into the table, the index's build, the cost of a write with it, a search's p50.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { silentLogger } from "@stavrobot/common";
import { FAKE_CONCEPTS, startFakeEmbeddings } from "@stavrobot/common/test-support";
import { openPglite } from "../src/db/pglite.js";
import { migrate } from "../src/db/migrations.js";
import { createEmbeddingsClient } from "../src/embeddings/client.js";
import { RECALL_DEFAULTS, recall } from "../src/embeddings/recall.js";
import { VectorCache, fusedSearch, nearestInApp } from "../src/embeddings/search.js";
import { VectorIndexes } from "../src/embeddings/vector-index.js";
import { EmbeddingsWorker } from "../src/embeddings/worker.js";
import { percentile } from "./measure.js";

const TURNS = 200;
const FACTS = 20;
const K = 5;

/** Fact i: two concepts, named in the fact by one word and in the question by another. */
function plantedFacts(): { fact: string; question: string }[] {
  const pairs: [number, number][] = [];
  for (let a = 0; a < FAKE_CONCEPTS.length && pairs.length < FACTS; a++)
    for (let b = a + 1; b < FAKE_CONCEPTS.length && pairs.length < FACTS; b++) pairs.push([a, b]);
  return pairs.map(([a, b], i) => {
    const [factA, askA] = [FAKE_CONCEPTS[a]![0]!, FAKE_CONCEPTS[a]![1]!];
    const [factB, askB] = [FAKE_CONCEPTS[b]![0]!, FAKE_CONCEPTS[b]![1]!];
    return {
      fact: `note ${i}: the ${factA} and the ${factB} go together, remember quartz${i}`,
      question: `what about my ${askA} and ${askB}?`,
    };
  });
}

/** A filler turn: words the fake knows no meaning of, none of the questions'. */
function filler(i: number): string {
  const words = ["tomatoes", "invoice", "printer", "garden", "umbrella", "laptop", "coffee", "train"];
  return `chat ${i}: the ${words[i % words.length]} and the ${words[(i * 3 + 1) % words.length]} again`;
}

export async function recallBench(): Promise<string[]> {
  const embeddings = await startFakeEmbeddings();
  const dir = mkdtempSync(join(tmpdir(), "stavrobot-bench-recall-"));
  const db = await openPglite(join(dir, "pglite"));
  try {
    await migrate(db);
    const facts = plantedFacts();
    const spacing = Math.floor(TURNS / FACTS);
    const factTurn = new Map<number, number>();
    for (let i = 0; i < TURNS; i++) {
      const fact = i % spacing === 0 ? facts[i / spacing] : undefined;
      const user = fact?.fact ?? filler(i);
      const at = `now() - interval '${TURNS - i} hours'`;
      const said = await db.query<{ id: number }>(
        `INSERT INTO messages (role, content, search_text, agent_id, created_at) VALUES ('user', $1, $2, 1, ${at}) RETURNING id`,
        [JSON.stringify({ role: "user", content: user }), user],
      );
      await db.query(
        `INSERT INTO messages (role, content, search_text, agent_id, created_at) VALUES ('assistant', $1, 'Noted.', 1, ${at})`,
        [JSON.stringify({ role: "assistant", content: [{ type: "text", text: "Noted." }] })],
      );
      if (fact) factTurn.set(i / spacing, said.rows[0]!.id);
    }
    const client = createEmbeddingsClient({
      baseUrl: embeddings.url,
      model: "fake-embed-small",
      dimensions: 48,
      queryPrefix: "",
      documentPrefix: "",
    });
    const worker = new EmbeddingsWorker({ db, client, logger: silentLogger });
    for (let pass = 0; pass < 20; pass++) {
      await worker.cycle();
      if ((await worker.progress()).waiting === 0 && (await worker.progress()).ok >= TURNS) break;
    }
    const indexed = await worker.progress();

    const lines: string[] = [];
    const indexes = new VectorIndexes(db, silentLogger);
    for (const mode of ["compared in the app", "through pgvector's index"] as const) {
      const index = mode === "compared in the app" ? undefined : indexes;
      if (index) await index.maintain([client.identity]);
      const cache = new VectorCache();
      const search = (query: string, agentId: number, limit: number) =>
        fusedSearch({ db, client, cache, ...(index ? { index } : {}) }, query, agentId, limit);
      let words = 0;
      let vectors = 0;
      let fused = 0;
      const times: number[] = [];
      let bytes = 0;
      for (const [i, { question }] of facts.entries()) {
        const wanted = factTurn.get(i);
        const result = await search(question, 1, 50);
        const hits = result?.hits ?? [];
        // Each leg alone, from what the fused search saw: full text's matches by their rank, the
        // vector leg's by similarity.
        const wordHits = await db.query<{ source_id: number }>(
          `SELECT source_id FROM embedding_chunks WHERE source = 'turn'
             AND to_tsvector('english', content) @@ regexp_replace(plainto_tsquery('english', $1)::text, ' (&|<[0-9-]+>) ', ' | ', 'g')::tsquery
           ORDER BY ts_rank(to_tsvector('english', content), regexp_replace(plainto_tsquery('english', $1)::text, ' (&|<[0-9-]+>) ', ' | ', 'g')::tsquery) DESC
           LIMIT ${K}`,
          [question],
        );
        if (wordHits.rows.some((row) => row.source_id === wanted)) words++;
        const byMeaning = hits
          .filter((hit) => hit.similarity !== undefined)
          .sort((a, b) => (b.similarity ?? 0) - (a.similarity ?? 0))
          .slice(0, K);
        if (byMeaning.some((hit) => hit.source === "turn" && hit.sourceId === wanted)) vectors++;
        if (hits.slice(0, K).some((hit) => hit.source === "turn" && hit.sourceId === wanted)) fused++;
        // Recall as a turn runs it: the context holds none of the history (all compacted).
        const started = performance.now();
        const recalled = await recall({ db, search }, question, {
          agentId: 1,
          fromMessageId: undefined,
          summaryId: undefined,
          memoriesInPrompt: true,
        });
        times.push(performance.now() - started);
        bytes += Buffer.byteLength(recalled?.text ?? "");
      }
      const pct = (n: number) => `${n}/${FACTS}`;
      lines.push(
        `  vectors ${mode}: recall@${K} full text alone ${pct(words)}, vectors alone ${pct(vectors)}, fused ${pct(fused)}; ` +
          `recall before a turn p50 ${percentile(times, 50).toFixed(1)} ms, p95 ${percentile(times, 95).toFixed(1)} ms; ` +
          `${Math.round(bytes / FACTS)} bytes added per turn on average (at most ${RECALL_DEFAULTS.limit} snippets, ${RECALL_DEFAULTS.maxBytes} bytes)`,
      );
    }
    await worker.stop();
    return [
      `Recall (${TURNS} turns, ${FACTS} planted facts asked in other words; fake embeddings server, embedded database; ${indexed.ok} chunks indexed)`,
      ...lines,
      ...(await atScale(db)),
    ];
  } finally {
    await db.close();
    await embeddings.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

const SCALE_ROWS = 20_000;
const SCALE_DIMENSIONS = 1_536;
const SCALE_SEARCHES = 20;

/** A unit vector near one of 100 centres (embeddings cluster by topic), seeded. */
function clustered(random: () => number, centres: Float32Array[]): Float32Array {
  const centre = centres[Math.floor(random() * centres.length)] as Float32Array;
  const out = Float32Array.from(centre, (value) => value + (random() - 0.5) * 0.6);
  const norm = Math.hypot(...out);
  return out.map((value) => value / norm);
}

/**
 * The two ways at 20,000 chunks of 1,536 dimensions (text-embedding-3-small's size) in one
 * conversation: the index's build over them, a write with the index in place, a search's p50.
 */
async function atScale(db: Awaited<ReturnType<typeof openPglite>>): Promise<string[]> {
  let seed = 7;
  const random = () => (seed = (seed * 1_103_515_245 + 12_345) % 2_147_483_648) / 2_147_483_648;
  const centres = Array.from({ length: 100 }, () =>
    Float32Array.from({ length: SCALE_DIMENSIONS }, () => random() - 0.5),
  );
  const identity = "bench:scale:1536";
  const literal = (vector: Float32Array) => `{${Array.from(vector, String).join(",")}}`;
  const written: Float32Array[] = [];
  const write = async (count: number) => {
    for (let left = count; left > 0; left -= 500) {
      const from = written.length;
      const batch = Array.from({ length: Math.min(500, left) }, () => clustered(random, centres));
      written.push(...batch);
      await db.query(
        `INSERT INTO embedding_chunks (identity, source, source_id, agent_id, source_at, content, content_hash, status, embedding)
         SELECT $1, 'memory', $2 + n, 1, now() + ($2 + n) * interval '1 millisecond', 'chunk', 'h' || ($2 + n), 'ok', e::real[]
         FROM unnest($3::text[]) WITH ORDINALITY AS t(e, n)`,
        [identity, from - 1, batch.map(literal)],
      );
    }
  };
  const dot = (a: Float32Array, b: Float32Array) =>
    a.reduce((sum, value, i) => sum + value * (b[i] as number), 0);
  const writing = performance.now();
  await write(SCALE_ROWS);
  const plainWriteMs = (performance.now() - writing) / SCALE_ROWS;
  const queries = Array.from({ length: SCALE_SEARCHES }, () => clustered(random, centres));
  // The true ten nearest of all the chunks, by source_id (its place in `written`).
  const truth = queries.map(
    (query) =>
      new Set(
        written
          .map((vector, index) => ({ index, similarity: dot(query, vector) }))
          .sort((a, b) => b.similarity - a.similarity)
          .slice(0, 10)
          .map((entry) => entry.index),
      ),
  );
  const sourceOf = new Map(
    (
      await db.query<{ id: number; source_id: number }>(
        "SELECT id, source_id FROM embedding_chunks WHERE identity = $1",
        [identity],
      )
    ).rows.map((row) => [row.id, row.source_id]),
  );
  const exactTimes: number[] = [];
  const cache = new VectorCache();
  let exactFound = 0;
  for (const [i, query] of queries.entries()) {
    const started = performance.now();
    const { nearest } = await nearestInApp(db, cache, identity, 1, query, 10);
    exactTimes.push(performance.now() - started);
    exactFound += nearest.filter((entry) => truth[i]!.has(sourceOf.get(entry.id)!)).length;
  }
  const indexes = new VectorIndexes(db, silentLogger);
  const built = performance.now();
  await indexes.maintain([identity]);
  const buildMs = performance.now() - built;
  const indexTimes: number[] = [];
  let indexFound = 0;
  for (const [i, query] of queries.entries()) {
    const started = performance.now();
    const nearest = await indexes.nearest(identity, 1, query, 10);
    indexTimes.push(performance.now() - started);
    indexFound += nearest.filter((entry) => truth[i]!.has(sourceOf.get(entry.id)!)).length;
  }
  const wrote = performance.now();
  await write(500);
  const writeMs = (performance.now() - wrote) / 500;
  await db.query("DELETE FROM embedding_chunks WHERE identity = $1", [identity]);
  await indexes.maintain([]);
  const of = SCALE_SEARCHES * 10;
  return [
    `  at scale (${SCALE_ROWS.toLocaleString("en")} chunks of ${SCALE_DIMENSIONS} dimensions in one conversation, embedded database; found = of the true 10 nearest of all):`,
    `    in the app: search p50 ${percentile(exactTimes.slice(1), 50).toFixed(1)} ms once read (${exactTimes[0]?.toFixed(0)} ms reading them), over the newest 10,000 only: found ${exactFound}/${of}`,
    `    pgvector's index: built in ${(buildMs / 1000).toFixed(1)} s, a write ${writeMs.toFixed(1)} ms with it against ${plainWriteMs.toFixed(1)} ms without, search p50 ${percentile(indexTimes, 50).toFixed(1)} ms over all: found ${indexFound}/${of}`,
  ];
}

import { errorMessage } from "@stavrobot/common";
import type { EmbeddingsClient } from "../embeddings/client.js";
import { EmbeddingsError } from "../embeddings/client.js";
import { VECTOR_SEARCH_CAP } from "../embeddings/search.js";
import type { VectorIndexState } from "../embeddings/vector-index.js";
import type { IndexProgress } from "../embeddings/worker.js";
import type { Check } from "./checks.js";

/**
 * `[embeddings]`: when set, one small call to the endpoint and the index's progress; when not,
 * what setting it adds.
 */
export async function embeddingsCheck(
  /** Without `progress` (the app not running), the call only. */
  deps: { client: EmbeddingsClient; progress?: () => Promise<IndexProgress> } | undefined,
): Promise<Check> {
  const name = "embeddings";
  if (!deps)
    return {
      name,
      state: "ok",
      detail:
        'not configured: db_search finds the words used. Add [embeddings] to config.toml (see config.example.toml) and it also finds what was meant ("where does my sibling live?" finds "my sister\'s flat is in Thessaloniki").',
    };
  let dimensions: number;
  try {
    const [vector] = await deps.client.embed(["doctor"], "query", AbortSignal.timeout(20_000));
    dimensions = vector?.length ?? 0;
  } catch (error) {
    const setup = error instanceof EmbeddingsError && error.kind !== "transient";
    return {
      name,
      state: setup ? "fail" : "warn",
      detail: `${deps.client.endpoint}: ${errorMessage(error)}`,
      fix: setup
        ? "Correct [embeddings] in config.toml and restart; until then db_search finds words only."
        : "The provider may be busy or down; indexing retries by itself. Run npm run doctor again later.",
    };
  }
  const answered = `${deps.client.identity}, ${dimensions} dimensions answered`;
  if (!deps.progress)
    return { name, state: "ok", detail: `${answered}; the index is kept by the running app.` };
  const progress = await deps.progress();
  const rebuilding =
    progress.live !== undefined && progress.live !== progress.identity ? " (rebuilding for a new model)" : "";
  return {
    name,
    state: progress.problem ? "warn" : "ok",
    detail:
      `${answered}; index${rebuilding}: ${progress.ok} indexed, ` +
      `${progress.waiting} waiting, ${progress.rejected} refused. ${howCompared(progress.vectorIndex)}`,
    ...(progress.problem ? { fix: `Indexing stopped: ${progress.problem}` } : {}),
  };
}

/** How a search finds the nearest vectors, in words for the owner. */
function howCompared(state: VectorIndexState | undefined): string {
  const inApp = `compared exactly in the app, over the newest ${VECTOR_SEARCH_CAP.toLocaleString("en")} chunks of a conversation`;
  if (state?.kind === "available")
    return `Vectors are found through pgvector ${state.version}'s HNSW index, over all of the history.`;
  if (state?.kind === "unavailable")
    return `Vectors are ${inApp}: ${state.reason}. A database with pgvector 0.8 or newer (the embedded one has it) indexes them all.`;
  return `Vectors are ${inApp} until the index's first pass checks for pgvector.`;
}

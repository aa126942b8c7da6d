import type { Logger } from "@stavrobot/common";
import type { AppConfig } from "../boot/config.js";
import type { Database } from "../db/database.js";
import { createEmbeddingsClient, type EmbeddingsClient } from "./client.js";
import { fusedSearch, VectorCache, type FusedResult } from "./search.js";
import { VectorIndexes } from "./vector-index.js";
import { EmbeddingsWorker, type IndexProgress } from "./worker.js";

export interface EmbeddingsWing {
  client: EmbeddingsClient;
  worker: EmbeddingsWorker;
  indexes: VectorIndexes;
  search(query: string, agentId: number, limit: number): Promise<FusedResult | undefined>;
  progress(): Promise<IndexProgress>;
}

/** Search by meaning, when `[embeddings]` is configured: the client, the index's worker, the search. */
export function wireEmbeddings(options: {
  config: Readonly<AppConfig>;
  db: Database;
  logger: Logger;
  intervalMs?: number;
}): EmbeddingsWing | undefined {
  if (!options.config.embeddings) return undefined;
  const client = createEmbeddingsClient(options.config.embeddings);
  const cache = new VectorCache();
  const indexes = new VectorIndexes(options.db, options.logger);
  const worker = new EmbeddingsWorker({
    db: options.db,
    client,
    logger: options.logger,
    indexes,
    changed: () => cache.invalidate(),
    ...(options.intervalMs !== undefined ? { intervalMs: options.intervalMs } : {}),
  });
  return {
    client,
    worker,
    indexes,
    search: (query, agentId, limit) =>
      fusedSearch({ db: options.db, client, cache, index: indexes }, query, agentId, limit),
    progress: () => worker.progress(),
  };
}

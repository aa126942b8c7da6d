import type { Queryable } from "../db/database.js";

/**
 * Where stored text came from when it entered from outside: the labels its rows keep (trust/gate.ts).
 * A search that brings such text back into a turn says so (`details.outside` of its result), and
 * the turn holds outside text again, however long ago it was read.
 */

/** What is found, by kind: message ids, turns (by their user message's id), notes, summaries. */
export interface StoredHits {
  messages?: readonly number[];
  memories?: readonly number[];
  scratchpad?: readonly number[];
  compactions?: readonly number[];
}

/**
 * The origins of the outside text in these rows, as one line ("web_fetch, Bob (telegram 2002)"),
 * or undefined when none came from outside. A message counts with its whole turn: an answer
 * written after reading a page carries the page's words.
 */
export async function outsideOrigins(db: Queryable, hits: StoredHits): Promise<string | undefined> {
  const none = (ids: readonly number[] | undefined) => !ids || ids.length === 0;
  if (none(hits.messages) && none(hits.memories) && none(hits.scratchpad) && none(hits.compactions))
    return undefined;
  const result = await db.query<{ origins: string | null }>(
    `WITH origins AS (
       SELECT content->'provenance'->>'from' AS origin FROM messages
       WHERE id = ANY($1::int[]) AND content ? 'provenance'
       UNION
       -- The rest of each message's turn, by its inbox entry (both sides by index).
       SELECT o.content->'provenance'->>'from'
       FROM messages m JOIN messages o ON o.inbox_id = m.inbox_id AND o.agent_id = m.agent_id
       WHERE m.id = ANY($1::int[]) AND m.inbox_id IS NOT NULL AND o.content ? 'provenance'
       UNION SELECT provenance FROM memories WHERE id = ANY($2::int[])
       UNION SELECT provenance FROM scratchpad WHERE id = ANY($3::int[])
       UNION SELECT provenance FROM compactions WHERE id = ANY($4::int[])
     )
     SELECT string_agg(DISTINCT origin, ', ') AS origins FROM origins WHERE origin IS NOT NULL AND origin <> ''`,
    [hits.messages ?? [], hits.memories ?? [], hits.scratchpad ?? [], hits.compactions ?? []],
    // Run before every recalled turn: planned once (about a third of its time in PGlite).
    { prepare: true },
  );
  return result.rows[0]?.origins ?? undefined;
}

import type { Queryable } from "./database.js";

export interface Memory {
  id: number;
  content: string;
  /** Written in a turn that held outside text: where it came from (trust/gate.ts). */
  provenance: string | null;
  created_at: Date;
  updated_at: Date;
}

export interface ScratchpadEntry {
  id: number;
  title: string;
  body: string;
  /** Written in a turn that held outside text: where it came from (trust/gate.ts). */
  provenance: string | null;
  created_at: Date;
  updated_at: Date;
}

export async function listMemories(db: Queryable): Promise<Memory[]> {
  return (
    await db.query<Memory>("SELECT id, content, provenance, created_at, updated_at FROM memories ORDER BY id")
  ).rows;
}

export async function listScratchpadTitles(
  db: Queryable,
): Promise<Pick<ScratchpadEntry, "id" | "title" | "provenance">[]> {
  return (
    await db.query<{ id: number; title: string; provenance: string | null }>(
      "SELECT id, title, provenance FROM scratchpad ORDER BY id",
    )
  ).rows;
}

/**
 * Where the outside text behind labelled memories came from: the memories are in every prompt of
 * the owner's agent, so what they carry weighs on every turn as history does (trust/gate.ts).
 */
export async function memoryOrigins(db: Queryable): Promise<string[]> {
  const result = await db.query<{ provenance: string }>(
    "SELECT DISTINCT provenance FROM memories WHERE provenance IS NOT NULL ORDER BY provenance",
  );
  return result.rows.map((row) => row.provenance);
}

/**
 * `provenance`: where the outside text of the turn that wrote it came from. A label, once on a
 * row, stays through later writes (a rewrite may carry the same words); removing the row removes it.
 */
export async function createMemory(db: Queryable, content: string, provenance?: string): Promise<number> {
  const result = await db.query<{ id: number }>(
    "INSERT INTO memories (content, provenance) VALUES ($1, $2) RETURNING id",
    [content, provenance ?? null],
  );
  return (result.rows[0] as { id: number }).id;
}

export async function updateMemory(
  db: Queryable,
  id: number,
  content: string,
  provenance?: string,
): Promise<boolean> {
  const result = await db.query(
    "UPDATE memories SET content = $2, provenance = COALESCE(provenance, $3), updated_at = now() WHERE id = $1",
    [id, content, provenance ?? null],
  );
  return result.rowCount > 0;
}

export async function deleteMemory(db: Queryable, id: number): Promise<boolean> {
  return (await db.query("DELETE FROM memories WHERE id = $1", [id])).rowCount > 0;
}

export async function createScratchpad(
  db: Queryable,
  title: string,
  body: string,
  provenance?: string,
): Promise<number> {
  const result = await db.query<{ id: number }>(
    "INSERT INTO scratchpad (title, body, provenance) VALUES ($1, $2, $3) RETURNING id",
    [title, body, provenance ?? null],
  );
  return (result.rows[0] as { id: number }).id;
}

export async function updateScratchpad(
  db: Queryable,
  id: number,
  fields: { title?: string | undefined; body?: string | undefined },
  provenance?: string,
): Promise<boolean> {
  const result = await db.query(
    `UPDATE scratchpad SET title = COALESCE($2, title), body = COALESCE($3, body),
       provenance = COALESCE(provenance, $4), updated_at = now()
     WHERE id = $1`,
    [id, fields.title ?? null, fields.body ?? null, provenance ?? null],
  );
  return result.rowCount > 0;
}

export async function readScratchpad(db: Queryable, id: number): Promise<ScratchpadEntry | undefined> {
  const result = await db.query<ScratchpadEntry>(
    "SELECT id, title, body, provenance, created_at, updated_at FROM scratchpad WHERE id = $1",
    [id],
  );
  return result.rows[0];
}

export async function deleteScratchpad(db: Queryable, id: number): Promise<boolean> {
  return (await db.query("DELETE FROM scratchpad WHERE id = $1", [id])).rowCount > 0;
}

/** Changes whenever a memory or a scratchpad entry is written, added or removed (rows' `id:xmin`). */
export async function knowledgeVersion(db: Queryable): Promise<string> {
  const result = await db.query<{ version: string }>(
    `SELECT coalesce((SELECT string_agg(id || ':' || xmin, ',' ORDER BY id) FROM memories), '') || '|' ||
       coalesce((SELECT string_agg(id || ':' || xmin, ',' ORDER BY id) FROM scratchpad), '') AS version`,
  );
  return result.rows[0]?.version ?? "";
}

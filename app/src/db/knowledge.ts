import type { Queryable } from "./database.js";

export interface Memory {
  id: number;
  content: string;
  created_at: Date;
  updated_at: Date;
}

export interface ScratchpadEntry {
  id: number;
  title: string;
  body: string;
  created_at: Date;
  updated_at: Date;
}

export async function listMemories(db: Queryable): Promise<Memory[]> {
  return (await db.query<Memory>("SELECT id, content, created_at, updated_at FROM memories ORDER BY id"))
    .rows;
}

export async function listScratchpadTitles(db: Queryable): Promise<Pick<ScratchpadEntry, "id" | "title">[]> {
  return (await db.query<{ id: number; title: string }>("SELECT id, title FROM scratchpad ORDER BY id")).rows;
}

export async function createMemory(db: Queryable, content: string): Promise<number> {
  const result = await db.query<{ id: number }>("INSERT INTO memories (content) VALUES ($1) RETURNING id", [
    content,
  ]);
  return (result.rows[0] as { id: number }).id;
}

export async function updateMemory(db: Queryable, id: number, content: string): Promise<boolean> {
  const result = await db.query("UPDATE memories SET content = $2, updated_at = now() WHERE id = $1", [
    id,
    content,
  ]);
  return result.rowCount > 0;
}

export async function deleteMemory(db: Queryable, id: number): Promise<boolean> {
  return (await db.query("DELETE FROM memories WHERE id = $1", [id])).rowCount > 0;
}

export async function createScratchpad(db: Queryable, title: string, body: string): Promise<number> {
  const result = await db.query<{ id: number }>(
    "INSERT INTO scratchpad (title, body) VALUES ($1, $2) RETURNING id",
    [title, body],
  );
  return (result.rows[0] as { id: number }).id;
}

export async function updateScratchpad(
  db: Queryable,
  id: number,
  fields: { title?: string | undefined; body?: string | undefined },
): Promise<boolean> {
  const result = await db.query(
    `UPDATE scratchpad SET title = COALESCE($2, title), body = COALESCE($3, body), updated_at = now()
     WHERE id = $1`,
    [id, fields.title ?? null, fields.body ?? null],
  );
  return result.rowCount > 0;
}

export async function readScratchpad(db: Queryable, id: number): Promise<ScratchpadEntry | undefined> {
  const result = await db.query<ScratchpadEntry>(
    "SELECT id, title, body, created_at, updated_at FROM scratchpad WHERE id = $1",
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

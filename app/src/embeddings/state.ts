import type { Queryable } from "../db/database.js";

const KEY = "embeddings.live_identity";

/** The identity whose vectors db_search compares with (app_state), or undefined before the first. */
export async function liveIdentity(db: Queryable): Promise<string | undefined> {
  const result = await db.query<{ value: unknown }>("SELECT value FROM app_state WHERE key = $1", [KEY]);
  const value = result.rows[0]?.value;
  return typeof value === "string" ? value : undefined;
}

export async function setLiveIdentity(db: Queryable, identity: string): Promise<void> {
  await db.query(
    `INSERT INTO app_state (key, value) VALUES ($1, $2::jsonb)
     ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value, updated_at = now()`,
    [KEY, JSON.stringify(identity)],
  );
}

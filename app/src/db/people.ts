import type { Database, Queryable } from "./database.js";
import { MAIN_AGENT_ID } from "./messages.js";

export { MAIN_AGENT_ID };

/** An agent: the main one (the owner's) or a subagent with its own prompt and whitelists. */
export interface AgentRecord {
  id: number;
  name: string;
  system_prompt: string;
  allowed_tools: string[];
  allowed_plugins: string[];
  created_at: Date;
}

/** A person the assistant talks to, with their live identities (the reference's record shape). */
export interface InterlocutorRecord {
  id: number;
  display_name: string;
  agent_id: number | null;
  owner: boolean;
  enabled: boolean;
  created_at: Date;
  identities: { service: string; identifier: string }[];
}

const AGENT_COLUMNS = "id, name, system_prompt, allowed_tools, allowed_plugins, created_at";

export async function getAgent(db: Queryable, id: number): Promise<AgentRecord | undefined> {
  const result = await db.query<AgentRecord>(`SELECT ${AGENT_COLUMNS} FROM agents WHERE id = $1`, [id]);
  return result.rows[0];
}

export async function listAgents(db: Queryable): Promise<AgentRecord[]> {
  return (await db.query<AgentRecord>(`SELECT ${AGENT_COLUMNS} FROM agents ORDER BY id`)).rows;
}

export async function createAgent(
  db: Queryable,
  fields: { name: string; systemPrompt: string; allowedTools: string[]; allowedPlugins: string[] },
): Promise<number> {
  const result = await db.query<{ id: number }>(
    "INSERT INTO agents (name, system_prompt, allowed_tools, allowed_plugins) VALUES ($1, $2, $3, $4) RETURNING id",
    [fields.name, fields.systemPrompt, fields.allowedTools, fields.allowedPlugins],
  );
  return (result.rows[0] as { id: number }).id;
}

/** Updates the given fields; false when there is no such agent. */
export async function updateAgent(
  db: Queryable,
  id: number,
  fields: { name?: string; systemPrompt?: string; allowedTools?: string[]; allowedPlugins?: string[] },
): Promise<boolean> {
  const result = await db.query(
    `UPDATE agents SET name = coalesce($2, name), system_prompt = coalesce($3, system_prompt),
       allowed_tools = coalesce($4::text[], allowed_tools), allowed_plugins = coalesce($5::text[], allowed_plugins)
     WHERE id = $1`,
    [
      id,
      fields.name ?? null,
      fields.systemPrompt ?? null,
      fields.allowedTools ?? null,
      fields.allowedPlugins ?? null,
    ],
  );
  return (result.rowCount ?? 0) > 0;
}

/** Every interlocutor (or one), with its live identities, oldest first. */
export async function listInterlocutors(db: Queryable, id?: number): Promise<InterlocutorRecord[]> {
  const result = await db.query<
    Omit<InterlocutorRecord, "identities"> & { identities: InterlocutorRecord["identities"] }
  >(
    `SELECT i.id, i.display_name, i.agent_id, i.owner, i.enabled, i.created_at,
       coalesce((SELECT jsonb_agg(jsonb_build_object('service', ii.service, 'identifier', ii.identifier) ORDER BY ii.id)
         FROM interlocutor_identities ii WHERE ii.interlocutor_id = i.id AND ii.identifier IS NOT NULL), '[]'::jsonb) AS identities
     FROM interlocutors i WHERE $1::int IS NULL OR i.id = $1 ORDER BY i.id`,
    [id ?? null],
  );
  return result.rows;
}

export async function getInterlocutor(db: Queryable, id: number): Promise<InterlocutorRecord | undefined> {
  return (await listInterlocutors(db, id))[0];
}

/** The interlocutor one of whose live identities this is. */
export async function interlocutorByIdentity(
  db: Queryable,
  service: string,
  identifier: string,
): Promise<(Omit<InterlocutorRecord, "identities" | "created_at"> & { identity_id: number }) | undefined> {
  const result = await db.query<
    Omit<InterlocutorRecord, "identities" | "created_at"> & { identity_id: number }
  >(
    `SELECT i.id, i.display_name, i.agent_id, i.owner, i.enabled, ii.id AS identity_id
     FROM interlocutor_identities ii JOIN interlocutors i ON i.id = ii.interlocutor_id
     WHERE ii.service = $1 AND ii.identifier = $2`,
    [service, identifier],
    { prepare: true },
  );
  return result.rows[0];
}

/** The interlocutor of that display name (case-insensitive), with its identity on `service` if live. */
export async function interlocutorByName(
  db: Queryable,
  name: string,
  service: string,
): Promise<
  (Omit<InterlocutorRecord, "identities" | "created_at"> & { identifier: string | null }) | undefined
> {
  const result = await db.query<
    Omit<InterlocutorRecord, "identities" | "created_at"> & { identifier: string | null }
  >(
    `SELECT i.id, i.display_name, i.agent_id, i.owner, i.enabled,
       (SELECT ii.identifier FROM interlocutor_identities ii
        WHERE ii.interlocutor_id = i.id AND ii.service = $2 AND ii.identifier IS NOT NULL ORDER BY ii.id LIMIT 1) AS identifier
     FROM interlocutors i WHERE lower(i.display_name) = lower($1)`,
    [name, service],
  );
  return result.rows[0];
}

/**
 * The owner's record, as `[owner]` says at this start: their name, enabled, handled by the main
 * agent, with exactly the identities configured (others of theirs are soft-deleted). One
 * transaction; run at every start.
 */
export async function seedOwner(
  db: Pick<Database, "transaction">,
  owner: { name: string; identities: { service: string; identifier: string }[] },
): Promise<number> {
  return db.transaction(async (tx) => {
    const existing = await tx.query<{ id: number }>("SELECT id FROM interlocutors WHERE owner");
    let id = existing.rows[0]?.id;
    // Another record may already carry the name the owner has now: the owner's record keeps it.
    const clash = await tx.query<{ id: number }>(
      "SELECT id FROM interlocutors WHERE lower(display_name) = lower($1) AND NOT owner",
      [owner.name],
    );
    for (const row of clash.rows) {
      await tx.query(
        "UPDATE interlocutors SET display_name = display_name || ' (' || id || ')' WHERE id = $1",
        [row.id],
      );
    }
    if (id === undefined) {
      const inserted = await tx.query<{ id: number }>(
        "INSERT INTO interlocutors (display_name, owner, enabled, agent_id) VALUES ($1, true, true, $2) RETURNING id",
        [owner.name, MAIN_AGENT_ID],
      );
      id = (inserted.rows[0] as { id: number }).id;
    } else {
      await tx.query(
        "UPDATE interlocutors SET display_name = $2, enabled = true, agent_id = $3 WHERE id = $1",
        [id, owner.name, MAIN_AGENT_ID],
      );
    }
    const live = await tx.query<{ id: number; service: string; identifier: string }>(
      "SELECT id, service, identifier FROM interlocutor_identities WHERE interlocutor_id = $1 AND identifier IS NOT NULL",
      [id],
    );
    const wanted = (row: { service: string; identifier: string }) =>
      owner.identities.some(
        (identity) => identity.service === row.service && identity.identifier === row.identifier,
      );
    for (const row of live.rows) {
      if (!wanted(row))
        await tx.query("UPDATE interlocutor_identities SET identifier = NULL WHERE id = $1", [row.id]);
    }
    const missing = owner.identities.filter(
      (identity) =>
        !live.rows.some((row) => row.service === identity.service && row.identifier === identity.identifier),
    );
    for (const identity of missing) {
      // The owner's identity is theirs: taken from anyone else who had it.
      await tx.query(
        "UPDATE interlocutor_identities SET identifier = NULL WHERE service = $1 AND identifier = $2",
        [identity.service, identity.identifier],
      );
      await tx.query(
        "INSERT INTO interlocutor_identities (interlocutor_id, service, identifier) VALUES ($1, $2, $3)",
        [id, identity.service, identity.identifier],
      );
    }
    return id;
  });
}

/**
 * Records that the owner is told today about `key` (a person who wrote with no agent to answer
 * them); true only the first time per day, so a chatty stranger costs one notice a day.
 */
export async function firstNoticeToday(db: Queryable, key: string, day: string): Promise<boolean> {
  const result = await db.query(
    `INSERT INTO app_state (key, value, updated_at) VALUES ($1, jsonb_build_object('day', $2::text), now())
     ON CONFLICT (key) DO UPDATE SET value = excluded.value, updated_at = now()
       WHERE app_state.value->>'day' IS DISTINCT FROM $2::text
     RETURNING key`,
    [key, day],
  );
  return result.rows.length > 0;
}

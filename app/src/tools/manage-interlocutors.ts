import type { AgentTool } from "@mariozechner/pi-agent-core";
import { StringEnum, Type } from "@mariozechner/pi-ai";
import { encode } from "@toon-format/toon";
import { normalizeIdentifier } from "../channels/registry.js";
import { IdentifierError, isAllowlistService, parseIdentifier } from "../allowlist/identifiers.js";
import { isChannel } from "../audience.js";
import type { Database, Queryable } from "../db/database.js";
import {
  MAIN_AGENT_ID,
  getAgent,
  getInterlocutor,
  listInterlocutors,
  type InterlocutorRecord,
} from "../db/people.js";
import { ToolError, textResult, unknownAction } from "./result.js";

const actions = ["help", "create", "update", "delete", "add_identity", "remove_identity", "list"] as const;

const parameters = Type.Object({
  action: StringEnum(actions),
  display_name: Type.Optional(Type.String()),
  agent_id: Type.Optional(Type.Number()),
  enabled: Type.Optional(Type.Boolean()),
  id: Type.Optional(Type.Number()),
  service: Type.Optional(Type.String()),
  identifier: Type.Optional(Type.String()),
});

const HELP = `manage_interlocutors keeps the records of the people you talk to (interlocutors). Each has a display name, identities (a service such as "telegram" or "signal" and that service's identifier: a chat id, a phone number) and the agent that answers their messages.
Actions:
- create {display_name, agent_id?, enabled?, service?, identifier?}: a new interlocutor. The display name must be unique. service and identifier come together or not at all. An enabled interlocutor (the default) needs an agent_id, a subagent (the main agent answers only the owner), or their messages would reach nobody.
- update {id, display_name?, agent_id?, enabled?}: change what is given. agent_id 0 removes the assignment. enabled false refuses their messages both ways until enabled again (the assignment stays). The owner's record cannot be changed.
- delete {id}: removes every identity of the interlocutor (the record stays, as do its conversations). Not for the owner.
- add_identity {id, service, identifier} / remove_identity {id, service, identifier}: one identity. The owner's identities come from [owner] in config.toml.
- list: every interlocutor with their identities, whether it is the owner and whether it is enabled.
- help: this text.
To have someone talked to on your behalf: create a subagent (manage_agents) with the least tools it needs, create the person's interlocutor with their identity and that agent_id, then give the subagent its task with send_agent_message. When the task is done, disable the interlocutor.
The allowlist is a separate gate: an identity must also be on its service's allowlist (Settings → Allowlist, only the owner can change it) before messages pass either way.`;

export interface ManageInterlocutorsDeps {
  db: Database;
}

/** The reference's `manage_interlocutors`: people, their identities per service and their agent. */
export function createManageInterlocutorsTool(deps: ManageInterlocutorsDeps): AgentTool<typeof parameters> {
  const { db } = deps;
  return {
    name: "manage_interlocutors",
    label: "Manage interlocutors",
    description:
      'Manage interlocutors: the people you talk to, each with a display name, identities per service (service + identifier) and the agent that handles their messages. Use the "help" action to learn how to use this tool.',
    parameters,
    async execute(_id, params) {
      switch (params.action) {
        case "help":
          return textResult(HELP);
        case "list":
          return textResult(encode(await listInterlocutors(db), { indent: 2, delimiter: "," }));
        case "create":
          return shown(db, await create(db, params));
        case "update":
          return shown(db, await update(db, params));
        case "delete": {
          const id = await notOwner(db, params.id, "delete");
          await db.query("UPDATE interlocutor_identities SET identifier = NULL WHERE interlocutor_id = $1", [
            id,
          ]);
          return shown(db, id);
        }
        case "add_identity": {
          const id = await notOwner(db, params.id, "add_identity");
          const { service, identifier } = identityOf(params, "add_identity");
          const added = await db.query(
            `INSERT INTO interlocutor_identities (interlocutor_id, service, identifier) VALUES ($1, $2, $3)
             ON CONFLICT (service, identifier) WHERE identifier IS NOT NULL DO NOTHING`,
            [id, service, identifier],
          );
          if (added.rowCount === 0) throw taken(service, identifier);
          return shown(db, id);
        }
        case "remove_identity": {
          const id = await notOwner(db, params.id, "remove_identity");
          const { service, identifier } = identityOf(params, "remove_identity");
          await db.query(
            "UPDATE interlocutor_identities SET identifier = NULL WHERE interlocutor_id = $1 AND service = $2 AND identifier = $3",
            [id, service, identifier],
          );
          return shown(db, id);
        }
        default:
          throw unknownAction(String(params.action), actions);
      }
    },
  };
}

type Params = {
  display_name?: string | undefined;
  agent_id?: number | undefined;
  enabled?: boolean | undefined;
  id?: number | undefined;
  service?: string | undefined;
  identifier?: string | undefined;
};

async function create(db: Database, params: Params): Promise<number> {
  const name = params.display_name?.trim();
  if (!name) throw new ToolError("Error: display_name is required for create.");
  const hasService = Boolean(params.service?.trim());
  const hasIdentifier = Boolean(params.identifier?.trim());
  if (hasService !== hasIdentifier) {
    throw new ToolError("Error: service and identifier must both be provided or both absent.");
  }
  const agentId = params.agent_id === undefined || params.agent_id === 0 ? null : params.agent_id;
  if (params.enabled !== false && agentId === null) {
    throw new ToolError(
      "Error: cannot create an enabled interlocutor without an agent_id. Either provide an agent_id or set enabled to false.",
    );
  }
  if (agentId !== null) await agentExists(db, agentId);
  const identity = hasService ? identityOf(params, "create") : undefined;
  return db.transaction(async (tx) => {
    const clash = await tx.query("SELECT 1 FROM interlocutors WHERE lower(display_name) = lower($1)", [name]);
    if (clash.rows.length > 0) throw new ToolError(`Error: an interlocutor named "${name}" already exists.`);
    const inserted = await tx.query<{ id: number }>(
      "INSERT INTO interlocutors (display_name, agent_id, enabled) VALUES ($1, $2, $3) RETURNING id",
      [name, agentId, params.enabled ?? true],
    );
    const id = (inserted.rows[0] as { id: number }).id;
    if (identity) {
      const added = await tx.query(
        `INSERT INTO interlocutor_identities (interlocutor_id, service, identifier) VALUES ($1, $2, $3)
         ON CONFLICT (service, identifier) WHERE identifier IS NOT NULL DO NOTHING`,
        [id, identity.service, identity.identifier],
      );
      // Thrown inside the transaction: the interlocutor is not kept either.
      if (added.rowCount === 0) throw taken(identity.service, identity.identifier);
    }
    return id;
  });
}

async function update(db: Database, params: Params): Promise<number> {
  const id = await notOwner(db, params.id, "update");
  if (params.display_name === undefined && params.agent_id === undefined && params.enabled === undefined) {
    throw new ToolError(
      "Error: no fields to update. Provide at least one of display_name, agent_id, or enabled.",
    );
  }
  const current = (await getInterlocutor(db, id)) as InterlocutorRecord;
  const agentId =
    params.agent_id === undefined ? current.agent_id : params.agent_id === 0 ? null : params.agent_id;
  const enabled = params.enabled ?? current.enabled;
  if (enabled && agentId === null) {
    throw new ToolError(
      "Error: cannot enable an interlocutor without an agent_id. Either provide an agent_id or set enabled to false.",
    );
  }
  if (agentId !== null && agentId !== current.agent_id) await agentExists(db, agentId);
  const name = params.display_name?.trim() || current.display_name;
  const clash = await db.query(
    "SELECT 1 FROM interlocutors WHERE lower(display_name) = lower($1) AND id <> $2",
    [name, id],
  );
  if (clash.rows.length > 0) throw new ToolError(`Error: an interlocutor named "${name}" already exists.`);
  await db.query("UPDATE interlocutors SET display_name = $2, agent_id = $3, enabled = $4 WHERE id = $1", [
    id,
    name,
    agentId,
    enabled,
  ]);
  return id;
}

/** The id of an existing interlocutor that is not the owner (whose record comes from config.toml). */
async function notOwner(db: Queryable, id: number | undefined, action: string): Promise<number> {
  if (id === undefined) throw new ToolError(`Error: id is required for ${action}.`);
  const found = await getInterlocutor(db, id);
  if (!found) throw new ToolError(`Error: interlocutor ${id} not found.`);
  if (found.owner) throw new ToolError("Error: Cannot modify the owner interlocutor.");
  return id;
}

async function agentExists(db: Queryable, id: number): Promise<void> {
  // People other than the owner never talk to the owner's agent (the reference allowed it).
  if (id === MAIN_AGENT_ID) {
    throw new ToolError(
      `Error: agent ${MAIN_AGENT_ID} is the main agent, the owner's: anyone else needs a subagent of their own (manage_agents create).`,
    );
  }
  if (!(await getAgent(db, id))) {
    throw new ToolError(`Error: agent ${id} not found. manage_agents list shows the agents.`);
  }
}

/** A service and identifier as stored: a channel's identifiers in the form its allowlist keeps. */
function identityOf(params: Params, action: string): { service: string; identifier: string } {
  const service = params.service?.trim().toLowerCase();
  const raw = params.identifier?.trim();
  if (!service) throw new ToolError(`Error: service is required for ${action}.`);
  if (!raw) throw new ToolError(`Error: identifier is required for ${action}.`);
  if (!isAllowlistService(service)) return { service, identifier: raw };
  try {
    return { service, identifier: parseIdentifier(service, raw) };
  } catch (error) {
    if (!(error instanceof IdentifierError)) throw error;
    // One kept before identifiers were checked can still be removed.
    if (action === "remove_identity")
      return { service, identifier: isChannel(service) ? normalizeIdentifier(service, raw) : raw };
    throw new ToolError(`Error: ${error.message}`);
  }
}

function taken(service: string, identifier: string): ToolError {
  return new ToolError(
    `Error: identity (${service}, ${identifier}) is already assigned to another interlocutor.`,
  );
}

async function shown(db: Queryable, id: number): Promise<ReturnType<typeof textResult>> {
  const record = await getInterlocutor(db, id);
  if (!record) throw new ToolError(`Error: interlocutor ${id} not found.`);
  return textResult(encode(record, { indent: 2, delimiter: "," }), { ...record });
}

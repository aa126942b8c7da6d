import { badRequest, notFound, readValidJson, type Router } from "@stavrobot/common";
import { z } from "zod";
import type { Database } from "../db/database.js";
import { getAgent, listAgents, listInterlocutors } from "../db/people.js";
import { ToolError } from "../tool-error.js";
import { createManageAgentsTool } from "../tools/manage-agents.js";
import { createManageInterlocutorsTool } from "../tools/manage-interlocutors.js";
import type { AnyAgentTool } from "../tools/result.js";

const BODY_LIMIT = 256 * 1024;
const MAX_MESSAGES = 200;

/** The tools' own parameters (the reference's names): the page changes what the model would. */
const interlocutorSchema = z.strictObject({
  action: z.enum(["create", "update", "delete", "add_identity", "remove_identity"]),
  display_name: z.string().max(200).optional(),
  agent_id: z.number().int().min(0).optional(),
  enabled: z.boolean().optional(),
  id: z.number().int().positive().optional(),
  service: z.string().max(50).optional(),
  identifier: z.string().max(200).optional(),
});

const agentSchema = z.strictObject({
  action: z.enum(["create", "update"]),
  id: z.number().int().positive().optional(),
  name: z.string().max(200).optional(),
  system_prompt: z.string().max(100_000).optional(),
  allowed_tools: z.array(z.string().max(100)).max(50).optional(),
  allowed_plugins: z.array(z.string().max(200)).max(200).optional(),
});

/**
 * The People page's API (owner's password): `GET /api/people` → `{interlocutors, agents}` (the
 * tools' record shapes), `GET /api/people/agents/<id>/messages?limit` → `{agent, messages:
 * [{id, role, createdAt, text}]}` (the agent's conversation, newest `limit`, oldest first),
 * `POST /api/people/interlocutors` and `POST /api/people/agents` with the parameters of
 * `manage_interlocutors` / `manage_agents` (the same checks and texts: a refusal is 400 with the
 * tool's words) → `{message, interlocutors, agents}`.
 */
export function addPeopleRoutes(router: Router, db: Database): void {
  const interlocutors = createManageInterlocutorsTool({ db });
  const agents = createManageAgentsTool({ db });
  router
    .get("/api/people", async () => ({ json: await people(db) }))
    .get("/api/people/agents/:id/messages", async ({ params, url }) => {
      const id = Number(params.id);
      const agent = Number.isSafeInteger(id) ? await getAgent(db, id) : undefined;
      if (!agent) throw notFound("Agent not found");
      const raw = url.searchParams.get("limit") ?? "50";
      const limit = /^\d{1,3}$/.test(raw) ? Number(raw) : NaN;
      if (!(limit >= 1 && limit <= MAX_MESSAGES))
        throw badRequest(`'limit' must be an integer from 1 to ${MAX_MESSAGES}`);
      const rows = await db.query<{
        id: number;
        role: string;
        created_at: Date;
        text: string | null;
        content: unknown;
      }>(
        `SELECT id, role, created_at, search_text AS text, CASE WHEN search_text IS NULL THEN content END AS content
         FROM messages WHERE agent_id = $1 ORDER BY id DESC LIMIT $2`,
        [id, limit],
      );
      const messages = rows.rows.reverse().map((row) => ({
        id: row.id,
        role: row.role,
        createdAt: new Date(row.created_at).toISOString(),
        text: row.text ?? describe(row.content),
      }));
      return { json: { agent, messages } };
    })
    .post("/api/people/interlocutors", async ({ req }) => {
      const body = await readValidJson(req, BODY_LIMIT, interlocutorSchema);
      return { json: { message: await run(interlocutors, body), ...(await people(db)) } };
    })
    .post("/api/people/agents", async ({ req }) => {
      const body = await readValidJson(req, BODY_LIMIT, agentSchema);
      return { json: { message: await run(agents, body), ...(await people(db)) } };
    });
}

async function people(db: Database): Promise<{ interlocutors: unknown[]; agents: unknown[] }> {
  return { interlocutors: await listInterlocutors(db), agents: await listAgents(db) };
}

/** Runs the tool as the model would; its refusal is the caller's 400. */
async function run(tool: AnyAgentTool, params: Record<string, unknown>): Promise<string> {
  try {
    const result = await tool.execute("people-page", params);
    const first = result.content[0];
    return first?.type === "text" ? first.text : "";
  } catch (error) {
    if (error instanceof ToolError) throw badRequest(error.message);
    throw error;
  }
}

/** A message without words of its own (a tool call or result), in one line. */
function describe(content: unknown): string {
  const message = content as {
    role?: string;
    toolName?: string;
    content?: { type: string; name?: string; text?: string }[];
  };
  if (message.role === "toolResult") {
    const text = (message.content ?? []).map((block) => block.text ?? "").join("\n");
    return `(result of ${message.toolName ?? "a tool"}) ${text.length > 500 ? `${text.slice(0, 500)}…` : text}`.trim();
  }
  const calls = (message.content ?? [])
    .filter((block) => block.type === "toolCall")
    .map((block) => block.name);
  return calls.length > 0 ? `(calls ${calls.join(", ")})` : "(no text)";
}

import type { AgentTool } from "@mariozechner/pi-agent-core";
import { StringEnum, Type } from "@mariozechner/pi-ai";
import type { Queryable } from "../db/database.js";
import * as knowledge from "../db/knowledge.js";
import { ToolError, outsideDetails, textResult } from "./result.js";

const actions = ["upsert", "delete", "read", "help"] as const;

const parameters = Type.Object({
  action: StringEnum(actions, { description: "read: scratchpad only." }),
  store: Type.Optional(StringEnum(["memory", "scratchpad"] as const)),
  id: Type.Optional(Type.Integer({ description: "Entry id; omit to create a new entry." })),
  content: Type.Optional(Type.String({ description: "Memory text (memory upsert)." })),
  title: Type.Optional(Type.String({ description: "Scratchpad title (scratchpad upsert)." })),
  body: Type.Optional(Type.String({ description: "Scratchpad body (scratchpad upsert)." })),
});

const HELP = `manage_knowledge keeps two stores of knowledge:
- memory: short, important facts you always need (preferences, people, standing instructions). Every memory is shown to you in full in the system prompt on every turn, so keep them few and short.
- scratchpad: longer notes you need only sometimes. Only titles are shown in the system prompt; read a body with action "read".
Actions:
- upsert, store "memory": content (required); with id, replaces that memory, else creates one.
- upsert, store "scratchpad": title and body (both required to create; either to update an id).
- delete: store and id.
- read: store "scratchpad" and id; returns the title and body.
- help: this text.`;

export interface ManageKnowledgeDeps {
  db: Queryable;
  /**
   * Where the running turn's outside text came from, when it holds some (the trust gate says):
   * what it writes keeps that label, and reading a labelled entry brings it back (trust/gate.ts).
   */
  outside?: () => string | undefined;
}

export function createManageKnowledgeTool(deps: ManageKnowledgeDeps): AgentTool<typeof parameters> {
  const { db } = deps;
  const label = (): string | undefined => deps.outside?.();
  return {
    name: "manage_knowledge",
    label: "Manage knowledge",
    description:
      "Create, update, delete or read your memories (always in your prompt) and scratchpad notes " +
      "(titles in your prompt, bodies on demand). Use action 'help' for details.",
    parameters,
    async execute(_id, params) {
      switch (params.action) {
        case "help":
          return textResult(HELP);
        case "upsert":
          return params.store === "scratchpad"
            ? upsertScratchpad(db, params, label())
            : upsertMemory(db, params, label());
        case "delete": {
          if (!params.store || params.id === undefined) throw new ToolError("delete needs 'store' and 'id'.");
          const removed =
            params.store === "memory"
              ? await knowledge.deleteMemory(db, params.id)
              : await knowledge.deleteScratchpad(db, params.id);
          if (!removed) throw new ToolError(`${params.store} ${params.id} not found.`);
          return textResult(`${capitalise(params.store)} ${params.id} deleted.`);
        }
        case "read": {
          if (params.store !== "scratchpad" || params.id === undefined) {
            throw new ToolError(
              "read needs store 'scratchpad' and an 'id' (memories are already in your prompt).",
            );
          }
          const entry = await knowledge.readScratchpad(db, params.id);
          if (!entry) throw new ToolError(`scratchpad ${params.id} not found.`);
          // A note written after outside text is outside text again when read.
          return textResult(`Title: ${entry.title}\n\n${entry.body}`, outsideDetails(entry.provenance));
        }
        default:
          throw new ToolError(`Unknown action. Valid actions: ${actions.join(", ")}.`);
      }
    },
  };
}

async function upsertMemory(
  db: Queryable,
  params: { id?: number | undefined; content?: string | undefined; store?: string | undefined },
  provenance: string | undefined,
) {
  if (!params.store) throw new ToolError("upsert needs 'store' (memory or scratchpad).");
  const content = params.content?.trim();
  if (!content) throw new ToolError("memory upsert needs a non-empty 'content'.");
  if (params.id === undefined)
    return textResult(`Memory ${await knowledge.createMemory(db, content, provenance)} created.`);
  if (!(await knowledge.updateMemory(db, params.id, content, provenance)))
    throw new ToolError(`memory ${params.id} not found.`);
  return textResult(`Memory ${params.id} updated.`);
}

async function upsertScratchpad(
  db: Queryable,
  params: { id?: number | undefined; title?: string | undefined; body?: string | undefined },
  provenance: string | undefined,
) {
  const title = params.title?.trim() || undefined;
  const body = params.body?.trim() ? params.body : undefined;
  if (params.id === undefined) {
    if (!title || !body)
      throw new ToolError("scratchpad upsert needs 'title' and 'body' to create an entry.");
    return textResult(`Scratchpad ${await knowledge.createScratchpad(db, title, body, provenance)} created.`);
  }
  if (!title && !body) throw new ToolError("scratchpad update needs 'title' or 'body'.");
  if (!(await knowledge.updateScratchpad(db, params.id, { title, body }, provenance))) {
    throw new ToolError(`scratchpad ${params.id} not found.`);
  }
  return textResult(`Scratchpad ${params.id} updated.`);
}

function capitalise(text: string): string {
  return text.charAt(0).toUpperCase() + text.slice(1);
}

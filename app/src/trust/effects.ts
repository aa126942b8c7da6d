/**
 * What a tool call does to the world, said in code (not by the model): `none` (touches nothing of
 * the owner's), `reads-private` (reads the owner's data), `writes` (acts on the owner's own data:
 * notes, tables, files, schedules) or `acts` (acts outward: sends to someone, publishes a page,
 * installs or configures, runs code that can reach the network, fetches an address). The gate (`gate.ts`) stops both kinds of acting in a turn that read outside
 * text, and outward acting in a turn whose history holds some. A tool this file does not name (a
 * plugin's, an MCP server's) acts outward: what it does is not known here.
 */

import { isMcpClientTool } from "@stavrobot/common";
import { channelOfSendTool } from "../channels/registry.js";

export type Effect = "none" | "reads-private" | "writes" | "acts";

type Classifier = Effect | ((args: Record<string, unknown>) => Effect);

/** Actions of a multi-action tool that only read; every other action `acting`. */
const readsUnless =
  (acting: "writes" | "acts", ...reading: string[]): Classifier =>
  (args) =>
    typeof args.action === "string" && [...reading, "help"].includes(args.action) ? "reads-private" : acting;

/** SQL that only reads: a SELECT-like statement naming nothing that writes. */
const WRITES_SQL =
  /\b(insert|update|delete|merge|upsert|create|drop|alter|truncate|grant|revoke|copy|call|do|refresh|reindex|vacuum|cluster|lock|comment|security|listen|notify|prepare|execute|set|reset|discard|import|load|nextval|setval|set_config|pg_\w+|lo_\w+|dblink\w*)\b/i;

export function sqlOnlyReads(sql: string): boolean {
  const text = sql.replace(/--[^\n]*|\/\*[\s\S]*?\*\//g, " ").trim();
  return (
    /^(select|with|explain|show|values|table)\b/i.test(text) && !WRITES_SQL.test(text) && !/;\s*\S/.test(text)
  );
}

/**
 * The app's own tables whose rows carry where outside text came from (notes, summaries, the
 * conversation) or what only the owner decides (approvals, the allowlist): SQL writing them could
 * wash a label off or forge a decision, so it acts, whoever started the turn.
 */
const GUARDED_TABLES =
  /\b(memories|scratchpad|compactions|messages|approvals|allowlist|email_unproven_allowed)\b/i;

/** Every built-in tool but the channels' send tools (`channelOfSendTool`), by name. */
const BUILT_IN: Record<string, Classifier> = {
  load_tools: "none",
  db_search: "reads-private",
  execute_sql: (args) =>
    typeof args.query === "string" && sqlOnlyReads(args.query)
      ? "reads-private"
      : typeof args.query === "string" && !GUARDED_TABLES.test(args.query)
        ? "writes"
        : "acts",
  manage_knowledge: readsUnless("writes", "read"),
  manage_cron: readsUnless("writes", "list"),
  manage_files: readsUnless("writes", "read", "read_lines", "list", "search"),
  manage_uploads: readsUnless("writes", "read"),
  // A page is published at a public address, and what it loads leaves from the owner's browser.
  manage_pages: readsUnless("acts", "read", "list_versions"),
  // Who the people and agents are is the owner's own data (the allowlist, signed, is not in it).
  manage_interlocutors: readsUnless("writes", "list"),
  manage_agents: readsUnless("writes", "list"),
  manage_plugins: readsUnless("acts", "list", "show", "read", "search"),
  // Installing and checking for updates fetch from an address; removing changes only the owner's own.
  manage_skills: (args) =>
    args.action === "remove"
      ? "writes"
      : ["list", "read", "help"].includes(String(args.action))
        ? "reads-private"
        : "acts",
  // What another agent is told becomes a turn of its own, with outside text in it (gate.ts).
  send_agent_message: "none",
  // A plugin's tool may do anything; the MCP client's own tools (`resources/read`, `prompts/get`,
  // …: a "/" no plugin's tool has) only read what an MCP server offers.
  run_plugin_tool: (args) => (isMcpClientTool(args.tool) ? "reads-private" : "acts"),
  run_python: "acts",
  request_coding_task: "acts",
  web_search: "none",
  web_fetch: "acts",
  text_to_speech: "none",
};

export function isBuiltIn(tool: string): boolean {
  return tool in BUILT_IN || channelOfSendTool(tool) !== undefined;
}

/** The effect of one call of `tool` with `args`. */
export function effectOf(tool: string, args: unknown): Effect {
  const classifier = BUILT_IN[tool] ?? (channelOfSendTool(tool) !== undefined ? "acts" : undefined);
  if (classifier === undefined) return "acts";
  if (typeof classifier === "string") return classifier;
  return classifier(typeof args === "object" && args !== null ? (args as Record<string, unknown>) : {});
}

/**
 * Tools whose results are outside text: the web, a plugin's or MCP server's output (a mailbox, an
 * issue tracker), code that may have fetched something. A turn that called one holds outside text.
 */
export function bringsOutsideText(tool: string): boolean {
  if (!isBuiltIn(tool)) return true;
  return tool === "web_fetch" || tool === "web_search" || tool === "run_plugin_tool" || tool === "run_python";
}

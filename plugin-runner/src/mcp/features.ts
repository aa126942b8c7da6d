import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import type { Prompt, PromptMessage, ServerCapabilities } from "@modelcontextprotocol/sdk/types.js";
import type { McpClientTool } from "@stavrobot/common";
import type { RunOutcome } from "../chat-messages.js";
import type { JsonSchema } from "../formats/format.js";
import type { Redactor } from "./redact.js";
import { callOutcome } from "./result.js";
import type { ResourceWatch } from "./subscriptions.js";

/** A listing follows the server's `nextCursor` for at most this many items (and pages). */
export const MAX_LISTED = 1_000;
const MAX_PAGES = 100;

export interface ClientToolDef {
  name: McpClientTool;
  description: string;
  schema: JsonSchema;
}

const NO_PARAMETERS: JsonSchema = { type: "object", properties: {}, additionalProperties: false };

const RESOURCE_TOOLS: ClientToolDef[] = [
  {
    name: "resources/list",
    description:
      "Lists the server's resources (data it offers to read: files, records, pages): URI, name, type.",
    schema: NO_PARAMETERS,
  },
  {
    name: "resources/templates/list",
    description:
      "Lists the server's resource templates: URI patterns with {placeholders}; fill them in and read the URI with resources/read.",
    schema: NO_PARAMETERS,
  },
  {
    name: "resources/read",
    description:
      "Reads one resource by its URI (from resources/list, or a template filled in): text comes back as text, binary contents as files.",
    schema: {
      type: "object",
      properties: { uri: { type: "string", minLength: 1, description: "The resource's URI." } },
      required: ["uri"],
      additionalProperties: false,
    },
  },
];

const PROMPT_TOOLS: ClientToolDef[] = [
  {
    name: "prompts/list",
    description: "Lists the server's prompts (ready-made requests its author wrote) and their arguments.",
    schema: NO_PARAMETERS,
  },
  {
    name: "prompts/get",
    description: "Fetches one prompt's messages, its arguments filled in.",
    schema: {
      type: "object",
      properties: {
        name: { type: "string", minLength: 1, description: "The prompt's name (from prompts/list)." },
        arguments: {
          type: "object",
          additionalProperties: { type: "string" },
          description: 'Its arguments by name, each a string, e.g. {"topic": "tides"}.',
        },
      },
      required: ["name"],
      additionalProperties: false,
    },
  },
];

/** The client's own tools a server gets, by the features its handshake declared. */
export function clientTools(capabilities: ServerCapabilities | undefined): ClientToolDef[] {
  return [...(capabilities?.resources ? RESOURCE_TOOLS : []), ...(capabilities?.prompts ? PROMPT_TOOLS : [])];
}

export interface FeatureContext {
  client: Client;
  /** The server's plugin name, for the texts. */
  server: string;
  redact: Redactor;
  timeoutMs: number;
  /** The resources read and followed (`resources/subscribe`), marked in listings when they changed. */
  watch?: ResourceWatch;
}

/**
 * One of the client's own tools, run against the server. Listings follow `nextCursor` (at most
 * MAX_LISTED items); binary contents become files as a tool result's do (result.ts). A refusal of
 * the caller's input (an unknown prompt, a missing argument) is a failed outcome naming what is
 * there; an MCP error is thrown for the caller to word.
 */
export async function runClientTool(
  tool: McpClientTool,
  args: Record<string, unknown>,
  context: FeatureContext,
): Promise<RunOutcome> {
  const { client, timeoutMs, redact } = context;
  const options = { timeout: timeoutMs };
  switch (tool) {
    case "resources/list": {
      const { items, more } = await allPages(async (cursor) => {
        const page = await client.listResources(cursor ? { cursor } : {}, options);
        return { items: page.resources, nextCursor: page.nextCursor };
      });
      const lines = items.map(
        (resource) =>
          `- ${resource.uri}${context.watch?.mark(resource.uri) ?? ""}${label(resource.title ?? resource.name, resource.mimeType)}${about(resource.description)}`,
      );
      return listing(context, "resources", lines, more, "Read one with resources/read {uri}.");
    }
    case "resources/templates/list": {
      const { items, more } = await allPages(async (cursor) => {
        const page = await client.listResourceTemplates(cursor ? { cursor } : {}, options);
        return { items: page.resourceTemplates, nextCursor: page.nextCursor };
      });
      const lines = items.map(
        (template) =>
          `- ${template.uriTemplate}${label(template.title ?? template.name, template.mimeType)}${about(template.description)}`,
      );
      return listing(
        context,
        "resource templates",
        lines,
        more,
        "Fill in a template's {placeholders} and read the URI with resources/read {uri}.",
      );
    }
    case "resources/read": {
      const uri = String(args.uri);
      const result = await client.readResource({ uri }, options);
      await context.watch?.read(uri, timeoutMs);
      if (result.contents.length === 0)
        return { success: true, output: redact.text(`The resource ${uri} has no contents.`) };
      return callOutcome(
        "resource",
        { content: result.contents.map((resource) => ({ type: "resource", resource })) },
        redact,
      );
    }
    case "prompts/list": {
      const prompts = await listPrompts(context);
      const lines = prompts.items.map(
        (prompt) =>
          `- ${prompt.name}${prompt.title ? ` (${prompt.title})` : ""}${about(prompt.description)}${argumentsOf(prompt)}`,
      );
      return listing(
        context,
        "prompts",
        lines,
        prompts.more,
        "Fetch one with prompts/get {name, arguments}.",
      );
    }
    case "prompts/get":
      return getPrompt(String(args.name), (args.arguments ?? {}) as Record<string, string>, context);
  }
}

/**
 * A prompt's messages as one text (its binary contents as files): the messages one after
 * another, each headed by its role when the prompt has more than the user's words.
 */
async function getPrompt(
  name: string,
  given: Record<string, string>,
  context: FeatureContext,
): Promise<RunOutcome> {
  const { client, server, redact, timeoutMs } = context;
  const prompts = await listPrompts(context);
  const prompt = prompts.items.find((candidate) => candidate.name === name);
  if (!prompt && !prompts.more) {
    const names = prompts.items.map((candidate) => candidate.name).join(", ") || "(none)";
    return fail(redact, `MCP server "${server}" has no prompt "${name}". Its prompts: ${names}.`);
  }
  if (prompt) {
    const declared = prompt.arguments ?? [];
    const unknown = Object.keys(given).filter((key) => !declared.some((argument) => argument.name === key));
    if (unknown.length > 0)
      return fail(
        redact,
        `Prompt "${name}" has no argument${unknown.length > 1 ? "s" : ""} ${unknown.map((key) => `"${key}"`).join(", ")}. ` +
          `Its arguments: ${declared.map((argument) => argument.name).join(", ") || "(none)"}.`,
      );
    const missing = declared.filter((argument) => argument.required && given[argument.name] === undefined);
    if (missing.length > 0)
      return fail(
        redact,
        `Prompt "${name}" needs ${missing.map((argument) => `"${argument.name}"`).join(", ")}.${argumentsOf(prompt)}`,
      );
  }
  const result = await client.getPrompt({ name, arguments: given }, { timeout: timeoutMs });
  const headed = result.messages.some((message) => message.role !== "user");
  const content = result.messages.flatMap((message: PromptMessage) => [
    ...(headed ? [{ type: "text", text: `[${message.role}]` }] : []),
    message.content,
  ]);
  if (content.length === 0) return { success: true, output: `Prompt "${name}" has no messages.` };
  return callOutcome(`prompt-${name}`, { content }, redact);
}

function listPrompts(context: FeatureContext) {
  const { client, timeoutMs } = context;
  return allPages(async (cursor) => {
    const page = await client.listPrompts(cursor ? { cursor } : {}, { timeout: timeoutMs });
    return { items: page.prompts, nextCursor: page.nextCursor };
  });
}

/** Every page of a listing, following `nextCursor`; stops at MAX_LISTED items or a cursor seen before. */
export async function allPages<T>(
  page: (cursor: string | undefined) => Promise<{ items: T[]; nextCursor?: string | undefined }>,
): Promise<{ items: T[]; more: boolean }> {
  const items: T[] = [];
  const seen = new Set<string>();
  let cursor: string | undefined;
  for (let pages = 0; pages < MAX_PAGES; pages++) {
    const next = await page(cursor);
    items.push(...next.items);
    cursor = next.nextCursor;
    if (!cursor || seen.has(cursor)) return { items: items.slice(0, MAX_LISTED), more: false };
    seen.add(cursor);
    if (items.length >= MAX_LISTED) break;
  }
  return { items: items.slice(0, MAX_LISTED), more: true };
}

function listing(
  context: FeatureContext,
  what: string,
  lines: string[],
  more: boolean,
  hint: string,
): RunOutcome {
  const head =
    lines.length === 0
      ? `MCP server "${context.server}" has no ${what}.`
      : `${what[0]!.toUpperCase()}${what.slice(1)} of MCP server "${context.server}"${more ? ` (the first ${lines.length}; it has more)` : ""}. ${hint}`;
  return { success: true, output: context.redact.text([head, ...lines].join("\n")) };
}

function label(name: string | undefined, mimeType: string | undefined): string {
  const parts = [name, mimeType].filter((part): part is string => Boolean(part));
  return parts.length > 0 ? ` (${parts.join(", ")})` : "";
}

function about(description: string | undefined): string {
  return description ? `: ${description}` : "";
}

function argumentsOf(prompt: Prompt): string {
  const declared = prompt.arguments ?? [];
  if (declared.length === 0) return "";
  return ` Arguments: ${declared
    .map(
      (argument) =>
        `${argument.name}${argument.required ? " (required)" : ""}${argument.description ? ` – ${argument.description}` : ""}`,
    )
    .join("; ")}.`;
}

function fail(redact: Redactor, error: string): RunOutcome {
  return { success: false, error: redact.text(error) };
}

// A second MCP server of our own, on the SDK's low-level server side, for what the first cannot
// show: listings in pages (tools, resources, templates, prompts, each followed by `nextCursor`),
// resources read as text and as a binary, prompts with arguments, the client's roots, and tools
// that declare an output schema and keep it or not. `features-main.ts` runs it over stdio.
import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import {
  CallToolRequestSchema,
  ErrorCode,
  GetPromptRequestSchema,
  ListPromptsRequestSchema,
  ListResourceTemplatesRequestSchema,
  ListResourcesRequestSchema,
  ListToolsRequestSchema,
  McpError,
  ReadResourceRequestSchema,
} from "@modelcontextprotocol/sdk/types.js";
import type { Prompt, Resource, ResourceTemplate, Tool } from "@modelcontextprotocol/sdk/types.js";
import { RED_PIXEL_PNG } from "./fixture-server.js";

const COUNT = { type: "object" as const, properties: { count: { type: "number" } }, required: ["count"] };
const NONE = { type: "object" as const, properties: {} };

const TOOL_PAGES: Tool[][] = [
  [
    { name: "first-page", description: "On the first page.", inputSchema: NONE },
    { name: "shape-kept", description: "Keeps its output schema.", inputSchema: NONE, outputSchema: COUNT },
    {
      name: "shape-broken",
      description: "Breaks its output schema.",
      inputSchema: NONE,
      outputSchema: COUNT,
    },
    {
      name: "shape-missing",
      description: "Declares an output schema, returns none.",
      inputSchema: NONE,
      outputSchema: COUNT,
    },
  ],
  [
    { name: "second-page", description: "On the second page.", inputSchema: NONE },
    { name: "roots", description: "Asks the client for its roots.", inputSchema: NONE },
  ],
];

const RESOURCE_PAGES: Resource[][] = [
  [{ uri: "memo://note", name: "note", mimeType: "text/plain", description: "A short note." }],
  [{ uri: "memo://pixel.png", name: "pixel", mimeType: "image/png" }],
  [],
];

const TEMPLATE_PAGES: ResourceTemplate[][] = [
  [{ uriTemplate: "memo://item/{id}", name: "item", description: "One item by id." }],
  [{ uriTemplate: "memo://day/{date}", name: "day", mimeType: "text/plain" }],
];

const PROMPT_PAGES: Prompt[][] = [
  [
    {
      name: "greet",
      description: "Greets someone.",
      arguments: [
        { name: "name", description: "Who", required: true },
        { name: "mood", description: "How" },
      ],
    },
  ],
  [{ name: "dialogue", description: "A short exchange with a picture." }],
];

/** The page a cursor names (`page-N`), and the cursor of the next one. */
function paged<T>(pages: T[][], cursor: string | undefined): { items: T[]; nextCursor?: string } {
  const index = cursor ? Number(/^page-(\d+)$/.exec(cursor)?.[1] ?? NaN) : 0;
  if (!Number.isInteger(index) || index >= pages.length)
    throw new McpError(ErrorCode.InvalidParams, `unknown cursor ${cursor}`);
  return { items: pages[index]!, ...(index + 1 < pages.length ? { nextCursor: `page-${index + 1}` } : {}) };
}

export function buildFeaturesServer(): Server {
  const server = new Server(
    { name: "features", version: "1.0.0" },
    { capabilities: { tools: {}, resources: {}, prompts: {} } },
  );
  server.setRequestHandler(ListToolsRequestSchema, ({ params }) => {
    const { items, nextCursor } = paged(TOOL_PAGES, params?.cursor);
    return { tools: items, ...(nextCursor ? { nextCursor } : {}) };
  });
  server.setRequestHandler(CallToolRequestSchema, async ({ params }) => {
    const text = (value: string) => [{ type: "text" as const, text: value }];
    switch (params.name) {
      case "first-page":
      case "second-page":
        return { content: text(`${params.name} ran`) };
      case "shape-kept":
        return { content: text("three"), structuredContent: { count: 3 } };
      case "shape-broken":
        return { content: text("three"), structuredContent: { count: "three" } };
      case "shape-missing":
        return { content: text("three") };
      case "roots": {
        const { roots } = await server.listRoots();
        return { content: text(roots.map((root) => root.uri).join("\n") || "(no roots)") };
      }
      default:
        throw new McpError(ErrorCode.InvalidParams, `no tool ${params.name}`);
    }
  });
  server.setRequestHandler(ListResourcesRequestSchema, ({ params }) => {
    const { items, nextCursor } = paged(RESOURCE_PAGES, params?.cursor);
    return { resources: items, ...(nextCursor ? { nextCursor } : {}) };
  });
  server.setRequestHandler(ListResourceTemplatesRequestSchema, ({ params }) => {
    const { items, nextCursor } = paged(TEMPLATE_PAGES, params?.cursor);
    return { resourceTemplates: items, ...(nextCursor ? { nextCursor } : {}) };
  });
  server.setRequestHandler(ReadResourceRequestSchema, ({ params }) => {
    const { uri } = params;
    if (uri === "memo://note")
      return { contents: [{ uri, mimeType: "text/plain", text: "Buy bread and call Ada." }] };
    if (uri === "memo://pixel.png")
      return { contents: [{ uri, mimeType: "image/png", blob: RED_PIXEL_PNG }] };
    // What a server may say of its own secrets (the runner hides them).
    if (uri === "memo://token")
      return { contents: [{ uri, mimeType: "text/plain", text: `token ${process.env.FEATURES_TOKEN}` }] };
    const item = /^memo:\/\/item\/(\w+)$/.exec(uri);
    if (item) return { contents: [{ uri, mimeType: "text/plain", text: `item number ${item[1]}` }] };
    throw new McpError(-32002, `Resource not found: ${uri}`);
  });
  server.setRequestHandler(ListPromptsRequestSchema, ({ params }) => {
    const { items, nextCursor } = paged(PROMPT_PAGES, params?.cursor);
    return { prompts: items, ...(nextCursor ? { nextCursor } : {}) };
  });
  server.setRequestHandler(GetPromptRequestSchema, ({ params }) => {
    const args = params.arguments ?? {};
    if (params.name === "greet")
      return {
        description: "Greets someone.",
        messages: [
          {
            role: "user" as const,
            content: {
              type: "text" as const,
              text: `Write a ${args.mood ?? "warm"} greeting for ${args.name}.`,
            },
          },
        ],
      };
    if (params.name === "dialogue")
      return {
        messages: [
          { role: "user" as const, content: { type: "text" as const, text: "What is in the picture?" } },
          { role: "assistant" as const, content: { type: "text" as const, text: "A single red pixel." } },
          {
            role: "user" as const,
            content: { type: "image" as const, data: RED_PIXEL_PNG, mimeType: "image/png" },
          },
        ],
      };
    throw new McpError(ErrorCode.InvalidParams, `no prompt ${params.name}`);
  });
  return server;
}

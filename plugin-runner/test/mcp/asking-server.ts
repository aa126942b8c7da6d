// An MCP server of our own (the SDK's server side) that asks its client a question in the middle
// of a tool call (elicitation, form mode) and reports what came back; `asking-main.ts` runs it
// over stdio. It also offers a resource to subscribe to, and a tool that changes it.
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { SubscribeRequestSchema, UnsubscribeRequestSchema } from "@modelcontextprotocol/sdk/types.js";

export function buildAskingServer(): McpServer {
  const server = new McpServer({ name: "asking", version: "1.0.0" });
  let weather = "sunny";
  const subscribed = new Set<string>();
  server.server.registerCapabilities({ resources: { subscribe: true } });
  server.server.setRequestHandler(SubscribeRequestSchema, ({ params }) => {
    subscribed.add(params.uri);
    return {};
  });
  server.server.setRequestHandler(UnsubscribeRequestSchema, ({ params }) => {
    subscribed.delete(params.uri);
    return {};
  });
  server.registerResource("weather", "memo://weather", { mimeType: "text/plain" }, async (uri) => ({
    contents: [{ uri: uri.href, text: `The weather is ${weather}.` }],
  }));
  server.registerTool("change-weather", { description: "Makes it rain." }, async () => {
    weather = "rainy";
    if (subscribed.has("memo://weather")) await server.server.sendResourceUpdated({ uri: "memo://weather" });
    return {
      content: [{ type: "text", text: `changed; subscribed: ${[...subscribed].join(", ") || "none"}` }],
    };
  });
  server.registerTool("book-table", { description: "Books a table, asking the user how." }, async () => {
    const answer = await server.server.elicitInput(
      {
        message: "How shall I book the table?",
        requestedSchema: {
          type: "object",
          properties: {
            guests: { type: "integer", title: "Guests", minimum: 1, maximum: 12 },
            seating: { type: "string", enum: ["inside", "terrace"] },
            vegetarian: { type: "boolean", description: "Only vegetarian dishes", default: false },
            note: { type: "string", maxLength: 40 },
            date: { type: "string", format: "date" },
            extras: {
              type: "array",
              items: {
                anyOf: [
                  { const: "cake", title: "Birthday cake" },
                  { const: "flowers", title: "Flowers" },
                ],
              },
              maxItems: 2,
            },
          },
          required: ["guests", "seating"],
        },
      },
      { timeout: 600_000 },
    );
    return { content: [{ type: "text", text: JSON.stringify(answer) }] };
  });
  return server;
}

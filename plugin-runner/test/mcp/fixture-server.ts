// A small MCP server of our own, written with the SDK's server side, for the tests: every kind of
// result and behaviour the runner must handle. `main.ts` runs it over stdio; tests serve it over
// Streamable HTTP in-process.
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { z } from "zod";

/** A 1×1 red PNG. */
export const RED_PIXEL_PNG =
  "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==";

/** Tells one run of the process from the next (in a pid namespace every run is pid 2). */
const INSTANCE = Math.random().toString(36).slice(2, 10);

/** Calls of `wait-forever` that were cancelled (notifications/cancelled aborts their signal). */
let cancelled = 0;

export function buildFixtureServer(): McpServer {
  const server = new McpServer(
    { name: "fixture", title: "Fixture server", version: "1.0.0" },
    { instructions: "Fixture tools for the runner's tests." },
  );
  server.registerTool(
    "say.hello-world",
    { description: "Greets someone.", inputSchema: { name: z.string() } },
    async ({ name }) => ({ content: [{ type: "text", text: `Hello, ${name}!` }] }),
  );
  server.registerTool("draw-pixel", { description: "Draws a red pixel." }, async () => ({
    content: [
      { type: "text", text: "Here is a red pixel." },
      { type: "image", data: RED_PIXEL_PNG, mimeType: "image/png" },
    ],
  }));
  server.registerTool(
    "structured",
    { description: "Returns structured content and a resource." },
    async () => ({
      content: [
        { type: "text", text: "Weather report" },
        {
          type: "resource",
          resource: { uri: "file:///weather.txt", mimeType: "text/plain", text: "Sunny, 21 C" },
        },
      ],
      structuredContent: { temperature: 21, sky: "sunny" },
    }),
  );
  server.registerTool("refuse", { description: "Always fails." }, async () => ({
    content: [{ type: "text", text: "The fixture refuses politely." }],
    isError: true,
  }));
  server.registerTool(
    "count-slowly",
    { description: "Counts to three, reporting progress." },
    async (extra) => {
      const token = extra._meta?.progressToken;
      for (let step = 1; step <= 3; step++) {
        if (token !== undefined)
          await extra.sendNotification({
            method: "notifications/progress",
            params: { progressToken: token, progress: step, total: 3, message: `step ${step}` },
          });
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      return { content: [{ type: "text", text: "counted to 3" }] };
    },
  );
  server.registerTool("add-tool", { description: "Adds a tool named late-tool." }, async () => {
    server.registerTool("late-tool", { description: "Added while running." }, async () => ({
      content: [{ type: "text", text: "late tool ran" }],
    }));
    return { content: [{ type: "text", text: "added late-tool" }] };
  });
  server.registerTool(
    "whoami",
    { description: "Which process answers, and whether its secret is set." },
    async () => ({
      content: [
        {
          type: "text",
          text: `instance ${INSTANCE}; secret ${process.env.FIXTURE_TOKEN ? "set" : "unset"}; home ${process.env.HOME}; data ${process.env.FIXTURE_DATA ?? "(none)"}`,
        },
      ],
    }),
  );
  server.registerTool(
    "crash",
    { description: "Prints its secret to stderr and dies mid-call." },
    async () => {
      process.stderr.write(`fatal: token ${process.env.FIXTURE_TOKEN ?? "(none)"} rejected\n`);
      process.exit(3);
    },
  );
  server.registerTool(
    "hang",
    { description: "Never answers, and answers nothing else either." },
    async () => {
      const end = Date.now() + 600_000;
      while (Date.now() < end) {
        // A busy loop: not even a ping is answered.
      }
      return { content: [] };
    },
  );
  server.registerTool(
    "wait-forever",
    { description: "Waits until it is cancelled, and stays responsive." },
    async (extra) => {
      await new Promise<void>((resolve) =>
        extra.signal.addEventListener("abort", () => {
          cancelled++;
          resolve();
        }),
      );
      return { content: [{ type: "text", text: "cancelled" }] };
    },
  );
  server.registerTool("cancellations", { description: "How many waits were cancelled." }, async () => ({
    content: [{ type: "text", text: `cancelled ${cancelled}` }],
  }));
  server.registerTool(
    "fetch-url",
    { description: "Fetches a URL and says what happened.", inputSchema: { url: z.string() } },
    async ({ url }) => {
      try {
        const response = await fetch(url, { signal: AbortSignal.timeout(3_000) });
        return { content: [{ type: "text", text: `status ${response.status}: ${await response.text()}` }] };
      } catch (error) {
        const cause = (error as { cause?: { code?: string } }).cause?.code ?? "";
        return {
          content: [{ type: "text", text: `fetch failed: ${(error as Error).message} ${cause}` }],
          isError: true,
        };
      }
    },
  );
  server.registerTool(
    "read-file",
    { description: "Reads a file by path.", inputSchema: { path: z.string() } },
    async ({ path }) => {
      const { readFile } = await import("node:fs/promises");
      try {
        return { content: [{ type: "text", text: await readFile(path, "utf8") }] };
      } catch (error) {
        return { content: [{ type: "text", text: (error as Error).message }], isError: true };
      }
    },
  );
  server.registerTool(
    "write-file",
    { description: "Writes text to a file by path.", inputSchema: { path: z.string(), text: z.string() } },
    async ({ path, text }) => {
      const { writeFile } = await import("node:fs/promises");
      try {
        await writeFile(path, text);
        return { content: [{ type: "text", text: `wrote ${path}` }] };
      } catch (error) {
        return { content: [{ type: "text", text: (error as Error).message }], isError: true };
      }
    },
  );
  server.registerTool("cwd", { description: "Its working directory." }, async () => ({
    content: [{ type: "text", text: process.cwd() }],
  }));
  return server;
}

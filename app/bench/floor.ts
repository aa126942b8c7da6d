/**
 * The benchmark's floor: the least an HTTP chat server on pi-agent-core can do per turn. One
 * `POST /chat {message}` builds a fresh Agent with a short system prompt and one tool shaped like
 * execute_sql (answering a fixed result: there is no database), runs the turn against the model
 * given by FLOOR_MODEL_URL (the benchmark's fake), and answers `{response}`. Nothing is stored,
 * nothing is authenticated, nothing is queued. Run as its own process: it prints its port.
 */
import { createServer } from "node:http";
import { Agent } from "@mariozechner/pi-agent-core";
import { Type, getModels, type Api, type Model } from "@mariozechner/pi-ai";

const base = getModels("anthropic").find((model) => model.id === "claude-sonnet-4-5");
if (!base) throw new Error("pi-ai does not know claude-sonnet-4-5");
const model: Model<Api> = { ...base, baseUrl: process.env.FLOOR_MODEL_URL ?? "http://127.0.0.1:1" };

const tool = {
  name: "execute_sql",
  label: "Execute SQL",
  description: "Run SQL against the assistant's PostgreSQL database.",
  parameters: Type.Object({ query: Type.String({ description: "SQL statements." }) }),
  async execute() {
    return { content: [{ type: "text" as const, text: "rows[1]{one}:\n  1" }], details: {} };
  },
};

const server = createServer((req, res) => {
  const chunks: Buffer[] = [];
  req.on("data", (chunk: Buffer) => chunks.push(chunk));
  req.on("end", () => {
    void (async () => {
      const { message } = JSON.parse(Buffer.concat(chunks).toString("utf8")) as { message: string };
      const agent = new Agent({
        initialState: { systemPrompt: "You are a helpful assistant.", model, tools: [tool], messages: [] },
        getApiKey: () => "sk-ant-api03-floor",
      });
      await agent.prompt(message);
      const last = agent.state.messages.at(-1);
      const text =
        last?.role === "assistant"
          ? last.content.map((block) => (block.type === "text" ? block.text : "")).join("")
          : "";
      res.writeHead(200, { "Content-Type": "application/json" });
      res.end(JSON.stringify({ response: text }));
    })().catch((error: unknown) => {
      res.writeHead(500, { "Content-Type": "application/json" });
      res.end(JSON.stringify({ error: String(error) }));
    });
  });
});

server.listen(Number(process.env.PORT ?? 0), "127.0.0.1", () => {
  const address = server.address();
  process.stdout.write(`${typeof address === "object" && address ? address.port : 0}\n`);
});
process.on("SIGTERM", () => server.close(() => process.exit(0)));

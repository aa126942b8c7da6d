/**
 * The benchmark's floor: the least an HTTP chat server on pi-agent-core can do per turn. One
 * `POST /chat {message}` runs a turn against the model given by FLOOR_MODEL_URL (the benchmark's
 * fake) and answers `{response}`. Nothing is stored, nothing is authenticated, nothing is queued.
 * Run as its own process: it prints its port.
 *
 * The bare floor (the goal's): a fresh Agent per request, a short system prompt and one tool shaped
 * like execute_sql answering a fixed result (there is no database), so every request is ~1 KB.
 *
 * With FLOOR_CONVERSATION naming a JSON file `{system, tools}` (the product's system prompt and tool
 * definitions, as the product sent them): one Agent kept across requests with that prompt and those
 * tools, and each message given the product's Time/Source/Sender/Text header, so its requests carry
 * what the product's carry (the same prompt, tools and growing history) and differ only in having
 * no database, queue or authentication behind them. Every tool answers the same fixed result.
 */
import { readFileSync } from "node:fs";
import { createServer } from "node:http";
import { Agent, type AgentTool } from "@mariozechner/pi-agent-core";
import { Type, getModels, type Api, type Model, type TSchema } from "@mariozechner/pi-ai";

const base = getModels("anthropic").find((model) => model.id === "claude-sonnet-4-5");
if (!base) throw new Error("pi-ai does not know claude-sonnet-4-5");
const model: Model<Api> = { ...base, baseUrl: process.env.FLOOR_MODEL_URL ?? "http://127.0.0.1:1" };

async function fixedResult() {
  return { content: [{ type: "text" as const, text: "rows[1]{one}:\n  1" }], details: {} };
}

interface Conversation {
  system: string;
  tools: { name: string; description: string; input_schema: TSchema }[];
}

const conversationFile = process.env.FLOOR_CONVERSATION;
const conversation = conversationFile
  ? (JSON.parse(readFileSync(conversationFile, "utf8")) as Conversation)
  : undefined;

const tools: AgentTool[] = conversation
  ? conversation.tools.map((tool) => ({
      name: tool.name,
      label: tool.name,
      description: tool.description,
      parameters: tool.input_schema,
      execute: fixedResult,
    }))
  : [
      {
        name: "execute_sql",
        label: "Execute SQL",
        description: "Run SQL against the assistant's PostgreSQL database.",
        parameters: Type.Object({ query: Type.String({ description: "SQL statements." }) }),
        execute: fixedResult,
      },
    ];

function newAgent(): Agent {
  return new Agent({
    initialState: {
      systemPrompt: conversation?.system ?? "You are a helpful assistant.",
      model,
      tools,
      messages: [],
    },
    getApiKey: () => "sk-ant-api03-floor",
  });
}

const kept = conversation ? newAgent() : undefined;

/** The product's user-turn header, with the time as UTC (its length is the product's). */
function asTheProductSendsIt(message: string): string {
  const now = new Date();
  const day = now.toUTCString().slice(0, 3);
  const time = now.toISOString().slice(0, 19).replace("T", " ");
  return `Time: ${day} ${time}\nSource: cli\nSender: owner\nText: ${message}`;
}

const server = createServer((req, res) => {
  const chunks: Buffer[] = [];
  req.on("data", (chunk: Buffer) => chunks.push(chunk));
  req.on("end", () => {
    void (async () => {
      const { message } = JSON.parse(Buffer.concat(chunks).toString("utf8")) as { message: string };
      const agent = kept ?? newAgent();
      await agent.prompt(kept ? asTheProductSendsIt(message) : message);
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

import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import type { AgentMessage } from "@mariozechner/pi-agent-core";
import { getModels, type Api, type Model } from "@mariozechner/pi-ai";
import { openMigratedTestDatabase, type MigratedTestDatabase } from "../../test/helpers/db.js";
import type { Database } from "../db/database.js";
import { InboxStore } from "../db/inbox.js";
import { AnthropicWire } from "../model/anthropic/client.js";
import { rehearseTurnCode, rehearseTurnWrites } from "./rehearsal.js";

let testDb: MigratedTestDatabase;
let db: Database;

beforeAll(async () => {
  testDb = await openMigratedTestDatabase("rehearsal");
  db = testDb.db;
}, 120_000);

afterAll(async () => {
  await testDb?.close();
});

describe("rehearseTurnWrites", () => {
  it("runs a turn's writes and keeps none of them", async () => {
    const counts = async () => {
      const result = await db.query<{ inbox: number; messages: number; usage: number }>(
        `SELECT (SELECT count(*) FROM inbox) AS inbox, (SELECT count(*) FROM messages) AS messages,
                (SELECT count(*) FROM usage) AS usage`,
      );
      return result.rows[0];
    };
    await rehearseTurnWrites(db, "UTC");
    expect(await counts()).toEqual({ inbox: 0, messages: 0, usage: 0 });
    // The connection is left usable, outside any transaction: a real write commits.
    const { entry } = await new InboxStore(db).add(null, null, { message: "real", attachments: [] });
    expect(entry.id).toBeGreaterThan(0);
    expect(await counts()).toEqual({ inbox: 1, messages: 0, usage: 0 });
  });

  it("never throws, even when the database refuses", async () => {
    const broken = { ...db, transaction: async () => Promise.reject(new Error("down")) } as Database;
    await expect(rehearseTurnWrites(broken, "UTC")).resolves.toBeUndefined();
  });
});

/** A Messages API endpoint that keeps every request's body and answers "ok". */
async function captureServer() {
  const bodies: string[] = [];
  const answer = [
    { type: "message_start", message: { id: "msg_1", usage: { input_tokens: 1, output_tokens: 1 } } },
    { type: "content_block_start", index: 0, content_block: { type: "text", text: "" } },
    { type: "content_block_delta", index: 0, delta: { type: "text_delta", text: "ok" } },
    { type: "content_block_stop", index: 0 },
    { type: "message_delta", delta: { stop_reason: "end_turn" }, usage: { output_tokens: 1 } },
    { type: "message_stop" },
  ]
    .map((event) => `event: ${event.type}\ndata: ${JSON.stringify(event)}\n\n`)
    .join("");
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (chunk: Buffer) => chunks.push(chunk));
    req.on("end", () => {
      bodies.push(Buffer.concat(chunks).toString("utf8"));
      res.writeHead(200, { "content-type": "text/event-stream" });
      res.end(answer);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    bodies,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

describe("rehearseTurnCode", () => {
  const usage = {
    input: 1,
    output: 1,
    cacheRead: 0,
    cacheWrite: 0,
    totalTokens: 2,
    cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, total: 0 },
  };
  const history = (): AgentMessage[] => [
    { role: "user", content: [{ type: "text", text: "What is on the list?" }], timestamp: 1 },
    {
      role: "assistant",
      content: [{ type: "toolCall", id: "toolu_1", name: "execute_sql", arguments: { query: "SELECT 1" } }],
      api: "anthropic-messages",
      provider: "anthropic",
      model: "claude-sonnet-4-5",
      usage,
      stopReason: "toolUse",
      timestamp: 2,
    },
    {
      role: "toolResult",
      toolCallId: "toolu_1",
      toolName: "execute_sql",
      content: [{ type: "text", text: "rows[1]{one}:\n  1" }],
      isError: false,
      timestamp: 3,
    },
    {
      role: "assistant",
      content: [{ type: "text", text: "Milk and eggs." }],
      api: "anthropic-messages",
      provider: "anthropic",
      model: "claude-sonnet-4-5",
      usage,
      stopReason: "stop",
      timestamp: 4,
    },
  ];

  it("runs a whole turn without sending anything, and the next real request is unchanged by it", async () => {
    const server = await captureServer();
    const model = {
      ...(getModels("anthropic").find((m) => m.id === "claude-sonnet-4-5") as Model<Api>),
      baseUrl: server.url,
    };
    const rehearsed = new AnthropicWire();
    const fresh = new AnthropicWire();
    try {
      const messages = history();
      expect(await rehearseTurnCode({ wire: rehearsed, model, history: messages })).toBe(true);
      expect(server.bodies).toEqual([]);
      expect(messages).toEqual(history());
      // The first turn after it: the same history objects and a new message, as the engine sends them.
      const next = [...messages, { role: "user" as const, content: "And now?", timestamp: 5 }];
      const context = { systemPrompt: "You are helpful.", messages: next };
      const options = { apiKey: "sk-ant-api03-x", cacheRetention: "short" as const };
      expect((await rehearsed.stream(model, context, options).result()).stopReason).toBe("stop");
      expect((await fresh.stream(model, context, options).result()).stopReason).toBe("stop");
      expect(server.bodies).toHaveLength(2);
      expect(server.bodies[0]).toBe(server.bodies[1]);
      expect(JSON.parse(server.bodies[0] as string).messages).toHaveLength(5);
    } finally {
      rehearsed.close();
      fresh.close();
      await server.close();
    }
  });

  it("says so, without throwing, when the turn cannot run", async () => {
    const model = getModels("anthropic").find((m) => m.id === "claude-sonnet-4-5") as Model<Api>;
    const wire = new AnthropicWire();
    const broken = {
      ...wire,
      rehearse: () => {
        throw new Error("broken");
      },
    } as unknown as AnthropicWire;
    expect(await rehearseTurnCode({ wire: broken, model, history: history() })).toBe(false);
  });
});

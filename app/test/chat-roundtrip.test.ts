import { describe, expect, it } from "vitest";
import { textTurn, toolTurn } from "@stavrobot/common/test-support";
import { chat, useTestApp, type LlmKind } from "./helpers/app.js";

describe.each<LlmKind>(["anthropic", "openai"])("POST /chat through the %s protocol", (kind) => {
  const t = useTestApp({ kind });

  it("runs execute_sql on PostgreSQL and sends the result back to the model", async () => {
    t.fake.enqueue(
      toolTurn(
        "execute_sql",
        {
          query:
            "CREATE TABLE groceries (item text, qty int); INSERT INTO groceries VALUES ('eggs', 12), ('milk', 2); SELECT item, qty FROM groceries ORDER BY item",
        },
        "Let me store that.",
      ),
      textTurn("Stored: eggs and milk."),
    );
    const reply = await chat(t.app, "Remember 12 eggs and 2 milk");
    expect(reply.status).toBe(200);
    expect(reply.body).toEqual({ response: "Stored: eggs and milk." });

    expect(t.fake.requests).toHaveLength(2);
    const toolResultText = t.fake.requests[1]!.lastUserText;
    expect(toolResultText).toContain("eggs,12");
    expect(toolResultText).toContain("milk,2");
    // The first request carried the header and the tools.
    const first = JSON.stringify(t.fake.requests[0]!.body);
    expect(first).toContain("Source: cli");
    expect(first).toContain("Text: Remember 12 eggs and 2 milk");
    expect(first).toContain("execute_sql");

    const rows = await t.app.db.query<{ role: string }>("SELECT role FROM messages ORDER BY id");
    expect(rows.rows.map((r) => r.role)).toEqual(["user", "assistant", "toolResult", "assistant"]);
    const table = await t.app.db.query<{ item: string }>("SELECT item FROM groceries ORDER BY item");
    expect(table.rows.map((r) => r.item)).toEqual(["eggs", "milk"]);
    const inbox = await t.app.db.query<{ status: string; response: string }>(
      "SELECT status, response FROM inbox",
    );
    expect(inbox.rows).toEqual([{ status: "done", response: "Stored: eggs and milk." }]);
  });

  it("replays the saved history on the next turn", async () => {
    t.fake.reset();
    t.fake.enqueue(textTurn("You asked about eggs."));
    const reply = await chat(t.app, "What did I ask before?");
    expect(reply.body.response).toBe("You asked about eggs.");
    const sent = JSON.stringify(t.fake.requests[0]!.body);
    expect(sent).toContain("Remember 12 eggs and 2 milk");
    expect(sent).toContain("Stored: eggs and milk.");
  });
});

import { mkdirSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { bundleFixtureServer } from "./mcp/fixtures.js";
import {
  makeTempRoot,
  startFakeApp,
  startPluginHost,
  uniqueName,
  type FakeApp,
  type TestPluginHost,
} from "./helpers.js";

/**
 * An MCP server's question mid tool call (elicitation), against a server of our own written with
 * the SDK's server side, over stdio: the question reaches the app (a stand-in recording
 * `POST /questions`) worded for the owner, the owner's answer comes back through
 * `POST /questions/:id`, is checked against the server's form and reaches the server typed; a
 * decline, a question whose time runs out (cancelled, while the call outlives its own limit), and
 * answers that are refused.
 */
interface Question {
  id: string;
  plugin: string;
  text: string;
}

describe("an MCP server's questions to the owner", () => {
  const asking = uniqueName("mcp-ask");
  const hasty = uniqueName("mcp-hasty");
  let app: FakeApp;
  let host: TestPluginHost;
  let root: string;

  beforeAll(async () => {
    root = makeTempRoot("mcp-elicitation");
    mkdirSync(join(root, "server"), { mode: 0o755 });
    const script = await bundleFixtureServer(join(root, "server"), "asking");
    const file = join(root, "mcp-servers.json");
    writeFileSync(
      file,
      JSON.stringify({
        [asking]: { command: "node", args: [script], timeoutSeconds: 10 },
        // Its call's own limit (1 s) is shorter than its question's (1 s) and what comes after.
        [hasty]: { command: "node", args: [script], timeoutSeconds: 1, questionTimeoutSeconds: 1 },
      }),
    );
    app = await startFakeApp();
    host = await startPluginHost({ root: join(root, "host"), mcpServersFile: file, appUrl: app.url });
    for (const name of [asking, hasty])
      await vi.waitFor(
        async () => {
          const detail = await host.request("GET", `/bundles/${name}`);
          expect((detail.body as { server: { state: string } }).server.state).toBe("running");
        },
        { timeout: 30_000 },
      );
  }, 120_000);

  afterAll(async () => {
    await host?.close();
    await app?.close();
    for (const name of [asking, hasty]) await host?.host.isolation.removeUser(name);
    if (root) rmSync(root, { recursive: true, force: true });
  });

  const run = (plugin: string) => host.request("POST", `/bundles/${plugin}/tools/book-table/run`, {});
  const answer = (id: string, body: unknown) => host.request("POST", `/questions/${id}`, body);

  /** The next question the app was asked to put to the owner. */
  async function nextQuestion(plugin: string, seen: number): Promise<Question> {
    return vi.waitFor(
      () => {
        const questions = (app.questions as Question[]).filter((question) => question.plugin === plugin);
        expect(questions.length).toBeGreaterThan(seen);
        return questions[seen]!;
      },
      { timeout: 10_000 },
    );
  }

  it("tells a call's time to wait longer (the server's limit and its questions' time)", async () => {
    const detail = (await host.request("GET", `/bundles/${asking}`)).body as { runSeconds?: number };
    expect(detail.runSeconds).toBe(10 + 300);
  });

  it("puts the question to the owner and brings their checked, typed answer back to the server", async () => {
    const call = run(asking);
    const question = await nextQuestion(asking, 0);
    expect(question.id).toMatch(/^[a-z2-9]{4}$/);
    expect(question.text).toContain(
      `MCP server "${asking}" asks you (while its tool "book-table" runs): How shall I book the table?`,
    );
    expect(question.text).toContain("- guests (whole number 1–12; required) – Guests");
    expect(question.text).toContain("- seating (one of: inside, terrace; required)");
    expect(question.text).toContain("- vegetarian (yes/no; default false) – Only vegetarian dishes");
    expect(question.text).toContain(
      "- extras (at most 2 of: cake = Birthday cake, flowers = Flowers, separated by commas)",
    );
    expect(question.text).toContain(`Reply "/answer ${question.id} guests=… seating=…"`);
    expect(question.text).toContain("within 5 min it is cancelled");

    // A wrong answer is refused with every problem named, and the question keeps waiting.
    const refused = await answer(question.id, {
      action: "accept",
      values: { guests: "13", seating: "garden", note: "x".repeat(41), date: "2026-02-30", colour: "red" },
    });
    expect(refused.status).toBe(400);
    const said = (refused.body as { error: string }).error;
    expect(said).toContain('no field "colour" (its fields: guests, seating, vegetarian, note, date, extras)');
    expect(said).toContain('"guests" must be at most 12');
    expect(said).toContain('"seating" must be one of: inside, terrace');
    expect(said).toContain('"note" must be at most 40 characters');
    expect(said).toContain('"date" must be a date as YYYY-MM-DD');
    expect(said).toContain(`Question ${question.id} still waits`);
    const missing = await answer(question.id, { action: "accept", values: { guests: "two" } });
    expect((missing.body as { error: string }).error).toMatch(
      /"guests" must be a number; "seating" is required/,
    );

    const accepted = await answer(question.id, {
      action: "accept",
      values: { guests: "4", seating: "Terrace", date: "2026-12-01", extras: "cake, Flowers" },
    });
    expect(accepted).toEqual({
      status: 200,
      body: { message: `Answered: MCP server "${asking}" has your answer.` },
    });
    const result = (await call).body as { success: boolean; output: string };
    expect(result.success).toBe(true);
    expect(JSON.parse(result.output)).toEqual({
      action: "accept",
      content: {
        guests: 4,
        seating: "terrace",
        vegetarian: false,
        date: "2026-12-01",
        extras: ["cake", "flowers"],
      },
    });
    // Answered once: a second answer finds nothing waiting.
    const again = await answer(question.id, { action: "decline" });
    expect(again.status).toBe(404);
    expect((again.body as { error: string }).error).toContain(
      `No question ${question.id} waits for an answer`,
    );
  });

  it("tells the server the owner declined", async () => {
    const seen = (app.questions as Question[]).filter((question) => question.plugin === asking).length;
    const call = run(asking);
    const question = await nextQuestion(asking, seen);
    expect(await answer(question.id, { action: "decline" })).toEqual({
      status: 200,
      body: { message: `Declined: MCP server "${asking}" was told.` },
    });
    expect(JSON.parse(((await call).body as { output: string }).output)).toEqual({ action: "decline" });
  });

  it("cancels a question not answered in time, and the call, paused meanwhile, goes on", async () => {
    const result = (await run(hasty)).body as { success: boolean; output: string };
    // The server decides what its call does: this one reports the cancellation. Its own 1 s did
    // not run out while the question waited.
    expect(result).toEqual({ success: true, output: JSON.stringify({ action: "cancel" }) });
    const question = await nextQuestion(hasty, 0);
    expect(question.text).toContain("within 0");
    expect((await answer(question.id, { action: "accept", values: {} })).status).toBe(404);
  });

  it("follows a resource the model read, marking it in the listing once the server says it changed", async () => {
    const list = async () =>
      (
        (await host.request("POST", `/bundles/${asking}/tools/resources%2Flist/run`, {})).body as {
          output: string;
        }
      ).output;
    const read = async () =>
      (
        (
          await host.request("POST", `/bundles/${asking}/tools/resources%2Fread/run`, {
            uri: "memo://weather",
          })
        ).body as { output: string }
      ).output;
    expect(await list()).toContain("- memo://weather (weather, text/plain)");
    expect(await read()).toContain("The weather is sunny.");
    const changed = (await host.request("POST", `/bundles/${asking}/tools/change-weather/run`, {})).body;
    expect(changed).toEqual({ success: true, output: "changed; subscribed: memo://weather" });
    await vi.waitFor(async () =>
      expect(await list()).toContain("- memo://weather (updated since it was read) (weather, text/plain)"),
    );
    expect(await read()).toContain("The weather is rainy.");
    expect(await list()).toContain("- memo://weather (weather, text/plain)");
  });

  it("refuses an answer that is not one", async () => {
    expect((await answer("zzzz", { action: "decline" })).status).toBe(404);
    expect((await answer("NOT-AN-ID", { action: "decline" })).status).toBe(404);
    const wrong = await answer("zzzz", { action: "maybe" });
    expect(wrong.status).toBe(400);
  });
});

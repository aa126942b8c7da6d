import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { bringsOutsideText, effectOf, isBuiltIn, sqlOnlyReads } from "./effects.js";

const TOOLS_DIR = join(import.meta.dirname, "..", "tools");

describe("tool effects", () => {
  it("classifies every built-in tool the sources define (a new tool must be classified)", () => {
    const names = readdirSync(TOOLS_DIR)
      .filter((file) => file.endsWith(".ts") && !file.endsWith(".test.ts"))
      .flatMap((file) =>
        [...readFileSync(join(TOOLS_DIR, file), "utf8").matchAll(/\bname: "([a-z_]+)"/g)].map((m) => m[1]!),
      );
    expect(names.length).toBeGreaterThan(15);
    for (const name of names) expect(isBuiltIn(name), name).toBe(true);
    expect(isBuiltIn("send_telegram_message")).toBe(true);
  });

  it("says what each call does, by its action where it has one", () => {
    expect(effectOf("manage_knowledge", { action: "read" })).toBe("reads-private");
    expect(effectOf("manage_knowledge", { action: "upsert" })).toBe("writes");
    expect(effectOf("manage_cron", { action: "list" })).toBe("reads-private");
    expect(effectOf("manage_cron", { action: "create" })).toBe("writes");
    expect(effectOf("manage_pages", { action: "upsert" })).toBe("acts");
    expect(effectOf("manage_plugins", { action: "install" })).toBe("acts");
    expect(effectOf("manage_skills", { action: "read", name: "gym" })).toBe("reads-private");
    expect(effectOf("manage_skills", { action: "install", url: "https://example.org/s.md" })).toBe("acts");
    expect(effectOf("manage_skills", { action: "check_updates" })).toBe("acts");
    expect(effectOf("manage_skills", { action: "remove", name: "gym" })).toBe("writes");
    expect(effectOf("send_signal_message", { recipient: "x" })).toBe("acts");
    expect(effectOf("web_fetch", { url: "https://example.org" })).toBe("acts");
    expect(effectOf("db_search", { query: "x" })).toBe("reads-private");
    expect(effectOf("weather_forecast", {})).toBe("acts");
    expect(effectOf("manage_files", { action: "nonsense" })).toBe("writes");
  });

  it("counts SQL as reading only when nothing in it can write", () => {
    expect(sqlOnlyReads("SELECT * FROM memories")).toBe(true);
    expect(sqlOnlyReads("  -- look\nWITH x AS (SELECT 1) SELECT * FROM x")).toBe(true);
    expect(sqlOnlyReads("WITH gone AS (DELETE FROM memories RETURNING *) SELECT * FROM gone")).toBe(false);
    expect(sqlOnlyReads("SELECT 1; DROP TABLE memories")).toBe(false);
    expect(sqlOnlyReads("SELECT set_config('a', 'b', false)")).toBe(false);
    expect(sqlOnlyReads("INSERT INTO memories (content) VALUES ('x')")).toBe(false);
    expect(effectOf("execute_sql", { query: "SELECT * FROM memories" })).toBe("reads-private");
    expect(effectOf("execute_sql", { query: "UPDATE gym_log SET reps = 5" })).toBe("writes");
    // Rows that carry labels or the owner's decisions: writing them could wash a label off.
    expect(effectOf("execute_sql", { query: "UPDATE memories SET provenance = NULL" })).toBe("acts");
    expect(effectOf("execute_sql", { query: "insert into Approvals (tool) values ('x')" })).toBe("acts");
  });

  it("lets the MCP client's own tools only read, and every other plugin tool act", () => {
    for (const tool of [
      "resources/list",
      "resources/templates/list",
      "resources/read",
      "prompts/list",
      "prompts/get",
    ])
      expect(effectOf("run_plugin_tool", { plugin: "notes", tool }), tool).toBe("reads-private");
    expect(effectOf("run_plugin_tool", { plugin: "notes", tool: "write_note" })).toBe("acts");
    expect(effectOf("run_plugin_tool", { plugin: "notes", tool: "resources_read" })).toBe("acts");
    expect(effectOf("run_plugin_tool", { plugin: "notes", tool: "resources/write" })).toBe("acts");
    expect(effectOf("run_plugin_tool", { plugin: "notes" })).toBe("acts");
    expect(effectOf("run_plugin_tool", "not an object")).toBe("acts");
  });

  it("knows which results are outside text", () => {
    expect(bringsOutsideText("web_fetch")).toBe(true);
    expect(bringsOutsideText("run_plugin_tool")).toBe(true);
    expect(bringsOutsideText("github_search_issues")).toBe(true);
    expect(bringsOutsideText("manage_knowledge")).toBe(false);
  });
});

describe("addresses a turn was given", () => {
  it("finds web addresses as written, without trailing punctuation", async () => {
    const { addressesIn } = await import("./gate.js");
    expect(addressesIn("see https://example.org/a?b=1, and (http://x.test/y).")).toEqual([
      "https://example.org/a?b=1",
      "http://x.test/y",
    ]);
  });
});

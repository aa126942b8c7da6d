import { describe, expect, it } from "vitest";
import { MAX_LISTED, allPages, clientTools } from "./features.js";

describe("the MCP client's own tools", () => {
  it("are offered by what the server's handshake declared", () => {
    expect(clientTools(undefined)).toEqual([]);
    expect(clientTools({ tools: {} })).toEqual([]);
    expect(clientTools({ resources: {} }).map((tool) => tool.name)).toEqual([
      "resources/list",
      "resources/templates/list",
      "resources/read",
    ]);
    expect(clientTools({ prompts: {} }).map((tool) => tool.name)).toEqual(["prompts/list", "prompts/get"]);
  });
});

describe("a listing in pages", () => {
  it("follows nextCursor to the last page", async () => {
    const asked: (string | undefined)[] = [];
    const listed = await allPages(async (cursor) => {
      asked.push(cursor);
      const index = cursor ? Number(cursor) : 0;
      return { items: [index], ...(index < 2 ? { nextCursor: String(index + 1) } : {}) };
    });
    expect(listed).toEqual({ items: [0, 1, 2], more: false });
    expect(asked).toEqual([undefined, "1", "2"]);
  });

  it("stops at a cursor it was given before (a server going round in circles)", async () => {
    let calls = 0;
    const listed = await allPages(async () => ({ items: [++calls], nextCursor: "same" }));
    expect(listed).toEqual({ items: [1, 2], more: false });
  });

  it("stops at MAX_LISTED items and says there are more", async () => {
    let next = 0;
    const listed = await allPages(async () => ({
      items: Array.from({ length: 300 }, () => next++),
      nextCursor: `after-${next}`,
    }));
    expect(listed.items).toHaveLength(MAX_LISTED);
    expect(listed.more).toBe(true);
  });
});

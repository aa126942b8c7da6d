import { describe, expect, it } from "vitest";
import { formatResults } from "./execute-sql.js";

describe("execute_sql result formatting", () => {
  it("renders rows as TOON with the columns named once", () => {
    const text = formatResults(
      [
        {
          command: "SELECT",
          columns: ["id", "name"],
          rows: [
            { id: 1, name: "Ada" },
            { id: 2, name: "Linus" },
          ],
          rowCount: 2,
        },
      ],
      50_000,
    );
    expect(text).toBe("rows[2]{id,name}:\n  1,Ada\n  2,Linus");
  });

  it("reports commands by row count and empty selects by their columns", () => {
    const text = formatResults(
      [
        { command: "INSERT", columns: [], rows: [], rowCount: 3 },
        { command: "SELECT", columns: ["a"], rows: [], rowCount: 0 },
      ],
      50_000,
    );
    expect(text).toContain("command: INSERT\nrowCount: 3");
    expect(text).toContain("(no rows; columns: a)");
  });

  it("turns dates, bytes and bigints into compact text", () => {
    const text = formatResults(
      [
        {
          command: "SELECT",
          columns: ["at", "blob", "big"],
          rows: [{ at: new Date("2026-01-02T03:04:05Z"), blob: new Uint8Array(5), big: 12n }],
          rowCount: 1,
        },
      ],
      50_000,
    );
    expect(text).toContain("2026-01-02T03:04:05.000Z");
    expect(text).toContain("<5 bytes>");
    expect(text).toContain("12");
  });

  it("caps a huge result and says how to see the rest", () => {
    const rows = Array.from({ length: 5000 }, (_, i) => ({ id: i, body: "x".repeat(40) }));
    const text = formatResults(
      [{ command: "SELECT", columns: ["id", "body"], rows, rowCount: rows.length }],
      1024,
    );
    expect(Buffer.byteLength(text)).toBeLessThan(1400);
    expect(text).toMatch(/\[TRUNCATED: the result was \d+ bytes; only the first 1024 bytes/);
    expect(text).toContain("LIMIT");
  });
});

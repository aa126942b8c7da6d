import { describe, expect, it } from "vitest";
import { HttpError } from "@stavrobot/common";
import type { ToolParameter } from "@stavrobot/common";
import { safeFilename, validateParams } from "./validate.js";

const schema: Record<string, ToolParameter> = {
  name: { type: "string", description: "" },
  n: { type: "integer", description: "" },
  x: { type: "number", description: "" },
  on: { type: "boolean", description: "" },
  doc: { type: "file", description: "" },
};

function errorOf(fn: () => unknown): HttpError {
  try {
    fn();
  } catch (error) {
    if (error instanceof HttpError) return error;
    throw error;
  }
  throw new Error("expected an HttpError");
}

describe("validateParams", () => {
  it("accepts well-typed values, all optional, and decodes files", () => {
    const data = Buffer.from("abc").toString("base64");
    const result = validateParams(schema, {
      name: "a",
      n: 2,
      x: 1.5,
      on: false,
      doc: { filename: "a.txt", data },
    });
    expect(result.values).toEqual({ name: "a", n: 2, x: 1.5, on: false });
    expect(result.files).toEqual([{ param: "doc", filename: "a.txt", data: Buffer.from("abc") }]);
    expect(validateParams(schema, {})).toEqual({ values: {}, files: [] });
  });

  it("names unknown parameters and wrong types", () => {
    const unknown = errorOf(() => validateParams(schema, { k: 1 }));
    expect(unknown.status).toBe(400);
    expect(unknown.message).toBe('Unknown parameter: "k"');
    expect(unknown.details).toEqual({ parameters: schema });
    expect(errorOf(() => validateParams(schema, { n: 2.5 })).message).toBe(
      'Parameter "n" must be of type "integer"',
    );
    expect(errorOf(() => validateParams(schema, { x: Number.NaN })).message).toContain('"number"');
    expect(errorOf(() => validateParams(schema, { x: null })).message).toContain('"number"');
    expect(errorOf(() => validateParams(schema, { on: 1 })).message).toContain('"boolean"');
    expect(errorOf(() => validateParams(schema, { doc: { filename: "a" } })).message).toContain('"file"');
    expect(
      errorOf(() => validateParams(schema, { doc: { filename: "a", data: "", x: 1 } })).message,
    ).toContain('"file"');
  });

  it("refuses oversized files with 413", () => {
    const data = Buffer.alloc(20).toString("base64");
    expect(errorOf(() => validateParams(schema, { doc: { filename: "a", data } }, 10)).status).toBe(413);
  });
});

describe("safeFilename", () => {
  it("keeps plain names and refuses paths and control characters", () => {
    expect(safeFilename("report.pdf")).toBe("report.pdf");
    for (const bad of ["", ".", "..", "../x", "a/b", "a\\b", "a\nb", "a\0b", "x".repeat(256)]) {
      expect(safeFilename(bad)).toBeUndefined();
    }
  });
});

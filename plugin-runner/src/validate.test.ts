import { describe, expect, it } from "vitest";
import { DomainError } from "@stavrobot/common";
import type { ToolParameter } from "@stavrobot/common";
import { safeFilename } from "@stavrobot/common";
import { validateParams } from "./validate.js";

const schema: Record<string, ToolParameter> = {
  name: { type: "string", description: "" },
  n: { type: "integer", description: "" },
  x: { type: "number", description: "" },
  on: { type: "boolean", description: "" },
  doc: { type: "file", description: "" },
};

function errorOf(fn: () => unknown): DomainError {
  try {
    fn();
  } catch (error) {
    if (error instanceof DomainError) return error;
    throw error;
  }
  throw new Error("expected a DomainError");
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
    expect(unknown.kind).toBe("invalid");
    expect(unknown.message).toBe(
      'Unknown parameter: "k". Parameters of this tool: name (string), n (integer), x (number), on (boolean), doc (file)',
    );
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

  it("refuses oversized files as too large", () => {
    const data = Buffer.alloc(20).toString("base64");
    expect(errorOf(() => validateParams(schema, { doc: { filename: "a", data } }, 10)).kind).toBe(
      "too-large",
    );
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

describe("the reference's contract for unusual input", () => {
  it("names every unknown parameter (at most ten) and lists the tool's own", () => {
    const error = errorOf(() => validateParams(schema, { _output_dir: "/tmp/x", other: 1 }));
    expect(error.message).toBe(
      'Unknown parameters: "_output_dir", "other". Parameters of this tool: name (string), n (integer), x (number), on (boolean), doc (file)',
    );
    const many = Object.fromEntries(Array.from({ length: 50_000 }, (_, i) => [`k${i}`, i]));
    const capped = errorOf(() => validateParams(schema, many));
    expect(capped.message.length).toBeLessThan(400);
    expect(capped.message).toContain("(and 49990 more)");
  });

  it("passes parameters of types it does not know through unchecked", () => {
    const loose: Record<string, ToolParameter> = {
      tags: { type: "array", description: "" },
      options: { type: "object", description: "" },
    };
    const input = { tags: ["a", "b"], options: { deep: true } };
    expect(validateParams(loose, input)).toEqual({ values: input, files: [] });
  });
});

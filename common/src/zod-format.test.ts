import { describe, expect, it } from "vitest";
import { z } from "zod";
import { formatZodError } from "./zod-format.js";

describe("formatZodError", () => {
  it("names the field of each problem", () => {
    const result = z.object({ a: z.string(), b: z.number() }).safeParse({ a: 1, b: "x" });
    expect(result.success).toBe(false);
    const text = formatZodError(result.error as z.ZodError);
    expect(text).toMatch(/^a: .+; b: .+$/);
  });

  it("lists at most ten unknown keys and counts the rest", () => {
    const body = Object.fromEntries(Array.from({ length: 500_000 }, (_, i) => [`k${i}`, i]));
    const result = z.strictObject({}).safeParse(body);
    const text = formatZodError(result.error as z.ZodError);
    expect(text.length).toBeLessThan(300);
    expect(text).toContain('"k0", "k1"');
    expect(text).toContain('"k9"');
    expect(text).not.toContain('"k10"');
    expect(text).toContain("(and 499990 more)");
  });

  it("reports at most ten problems", () => {
    const schema = z.array(z.string());
    const result = schema.safeParse(Array.from({ length: 1000 }, () => 1));
    const text = formatZodError(result.error as z.ZodError);
    expect(text.split("; ")).toHaveLength(11);
    expect(text).toMatch(/and 990 more problems$/);
  });
});

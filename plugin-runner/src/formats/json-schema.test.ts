import { describe, expect, it } from "vitest";
import { DomainError } from "@stavrobot/common";
import { validateAgainstSchema, withoutRegexes } from "./json-schema.js";

describe("parameters checked against a declared JSON Schema", () => {
  const schema = {
    type: "object",
    properties: { city: { type: "string" }, days: { type: "integer", minimum: 1 } },
    required: ["city"],
    additionalProperties: false,
  };

  it("passes valid parameters through unchanged and names every problem of invalid ones", async () => {
    expect(await validateAgainstSchema(schema, { city: "Oslo", days: 2 })).toEqual({
      values: { city: "Oslo", days: 2 },
      files: [],
    });
    const error = await validateAgainstSchema(schema, { days: 0, extra: true }).then(
      () => undefined,
      (caught: unknown) => caught as DomainError,
    );
    expect(error).toBeInstanceOf(DomainError);
    expect(error?.kind).toBe("invalid");
    expect(error?.message).toContain("must have required property 'city'");
    expect(error?.message).toContain("/days must be >= 1");
    expect(error?.message).toContain("must NOT have additional properties");
  });

  it("never runs a plugin's regular expressions: a catastrophic pattern cannot hold the runner", async () => {
    const hostile = {
      type: "object",
      properties: { text: { type: "string", pattern: "^(a+)+$" }, pattern: { type: "string" } },
      patternProperties: { "^(x+)+$": { type: "number" } },
    };
    // Matching this input against the pattern would take about 2^40 steps.
    const input = { text: "a".repeat(40) + "!", pattern: "kept", [`${"x".repeat(40)}!`]: "not a number" };
    expect((await validateAgainstSchema(hostile, input)).values).toEqual(input);
    // A property named "pattern" is a property, not the keyword, and stays.
    expect(withoutRegexes(hostile)).toEqual({
      type: "object",
      properties: { text: { type: "string" }, pattern: { type: "string" } },
    });
  });

  it("checks nothing with a schema that does not compile, as the format's own host would not", async () => {
    const broken = { type: "object", properties: { a: { $ref: "https://example.com/remote.json" } } };
    expect((await validateAgainstSchema(broken, { a: 1 })).values).toEqual({ a: 1 });
  });
});

import { describe, expect, it } from "vitest";
import { FORMAT_TOOL_NAME, derivePluginName, flatParameters } from "./format.js";

describe("names across formats", () => {
  it("derives a plugin name from a format's own name, a folder or a repository", () => {
    expect(derivePluginName("hello_world")).toBe("hello-world");
    expect(derivePluginName("Multi_Lang.Tools")).toBe("multi-lang-tools");
    expect(derivePluginName("@scope/pkg")).toBe("scopepkg");
    expect(derivePluginName("artifactConverter")).toBe("artifactconverter");
    expect(derivePluginName("--a__b--")).toBe("a-b");
    expect(derivePluginName("日本")).toBeUndefined();
    expect(derivePluginName("x".repeat(80) + "_y")).toHaveLength(64);
  });

  it("accepts the tool names formats declare, and none that is not a safe URL segment", () => {
    for (const name of ["example.echo", "hello_greet", "get-sum", "a"])
      expect(FORMAT_TOOL_NAME.test(name)).toBe(true);
    for (const name of [".", "..", ".hidden", "a/b", "a b", "", "x".repeat(65)]) {
      expect(FORMAT_TOOL_NAME.test(name)).toBe(false);
    }
  });

  it("gives a flat view of a schema's top-level properties", () => {
    expect(
      flatParameters({
        type: "object",
        properties: { a: { type: "string", description: "A" }, b: { type: ["number", "null"] }, c: true },
      }),
    ).toEqual({
      a: { type: "string", description: "A" },
      b: { type: "number|null", description: "" },
      c: { type: "any", description: "" },
    });
    expect(flatParameters(undefined)).toEqual({});
  });
});

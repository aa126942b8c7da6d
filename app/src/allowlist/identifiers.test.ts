import { describe, expect, it } from "vitest";
import { IdentifierError, parseIdentifier } from "./identifiers.js";

describe("parseIdentifier", () => {
  it("keeps each service's identifiers in their stored form", () => {
    expect(parseIdentifier("telegram", 4242)).toBe("4242");
    expect(parseIdentifier("telegram", " -100123 ")).toBe("-100123");
    expect(parseIdentifier("signal", "\u200e+15555550123")).toBe("+15555550123");
    expect(parseIdentifier("whatsapp", "+447700900123")).toBe("+447700900123");
    expect(parseIdentifier("email", " Ada@Example.COM ")).toBe("ada@example.com");
  });

  it("refuses what is not an identifier of the service, saying what one looks like", () => {
    for (const [service, entry] of [
      ["telegram", "<img src=x onerror=alert(1)>"],
      ["telegram", 1.5],
      ["signal", "5555550123"],
      ["whatsapp", "<b>+1</b>"],
      ["email", "not an address"],
    ] as const) {
      expect(() => parseIdentifier(service, entry)).toThrow(IdentifierError);
    }
    expect(() => parseIdentifier("signal", "555")).toThrow(
      'Invalid signal identifier "555": a Signal number is in international form, such as +15555550123.',
    );
  });

  it("takes * (anyone) only where asked to", () => {
    expect(parseIdentifier("telegram", "*", { wildcard: true })).toBe("*");
    expect(() => parseIdentifier("telegram", "*")).toThrow(IdentifierError);
  });
});

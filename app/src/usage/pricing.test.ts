import { getModel } from "@mariozechner/pi-ai";
import { describe, expect, it } from "vitest";
import { resolveModel } from "../model/model.js";
import { createPriceList, spendOfCall } from "./pricing.js";

describe("the web tools' price list", () => {
  const assistant = resolveModel({
    provider: "anthropic",
    model: "claude-sonnet-5",
    cost: { input: 4, output: 20 },
  }).model;
  const prices = createPriceList(assistant);

  it("prices the assistant's own model as config.toml does", () => {
    expect(prices("claude-sonnet-5")).toEqual({
      cost: { input: 4, output: 20, cacheRead: 0.3, cacheWrite: 3.75 },
    });
  });

  it("prices a listed model at pi-ai's list price, Anthropic's first", () => {
    expect(prices("claude-haiku-4-5")).toEqual({ cost: getModel("anthropic", "claude-haiku-4-5").cost });
    expect(prices("gpt-4o-mini").cost).toEqual(getModel("openai", "gpt-4o-mini").cost);
  });

  it("prices a Claude pi-ai does not list as its template, and says which", () => {
    expect(prices("claude-haiku-5")).toEqual({
      cost: getModel("anthropic", "claude-haiku-4-5").cost,
      template: "claude-haiku-4-5",
    });
    expect(prices("some-other-model")).toEqual({ cost: undefined });
  });

  it("counts a call's tokens at those prices, plus the searches", () => {
    const spend = spendOfCall(prices("claude-haiku-5").cost, { input: 1_000_000, output: 100_000 }, 2);
    expect(spend.costUsd).toBeCloseTo(1 + 0.5 + 0.02, 10);
    expect(spendOfCall(undefined, { input: 10, output: 10 }, 1).costUsd).toBe(0.01);
  });
});

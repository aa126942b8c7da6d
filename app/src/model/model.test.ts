import { getModel } from "@mariozechner/pi-ai";
import { ConfigError } from "@stavrobot/common";
import { describe, expect, it } from "vitest";
import type { AppConfig } from "../boot/config.js";
import { describeModel, resolveModel } from "./model.js";

type Settings = Parameters<typeof resolveModel>[0] & Pick<AppConfig, "budget">;
const settings = (extra: Partial<Settings>): Settings => ({ provider: "anthropic", model: "", ...extra });

function configError(run: () => unknown): string {
  try {
    run();
  } catch (error) {
    expect(error).toBeInstanceOf(ConfigError);
    return (error as Error).message;
  }
  throw new Error("expected a ConfigError");
}

describe("resolveModel", () => {
  const sonnet46 = getModel("anthropic", "claude-sonnet-4-6");

  it("takes a listed model as pi-ai lists it, as a copy", () => {
    const { model, origin } = resolveModel(settings({ model: "claude-sonnet-4-6" }));
    expect(origin).toEqual({ kind: "listed" });
    expect(model).toEqual(sonnet46);
    expect(model).not.toBe(sonnet46);
    model.cost.input = 99;
    expect(sonnet46.cost.input).toBe(3);
  });

  it("lets config.toml change a listed model's window, output limit and prices, key by key", () => {
    const { model } = resolveModel(
      settings({
        model: "claude-sonnet-4-6",
        contextWindow: 200_000,
        maxTokens: 8_000,
        cost: { input: 2.5, cacheWrite: 0 },
      }),
    );
    expect(model).toMatchObject({ contextWindow: 200_000, maxTokens: 8_000 });
    expect(model.cost).toEqual({ input: 2.5, output: 15, cacheRead: 0.3, cacheWrite: 0 });
    expect(sonnet46.cost).toEqual({ input: 3, output: 15, cacheRead: 0.3, cacheWrite: 3.75 });
  });

  it("describes an id pi-ai does not list by its closest listed model, under the new id", () => {
    const { model, origin } = resolveModel(settings({ model: "claude-sonnet-5" }));
    expect(origin).toEqual({ kind: "template", template: "claude-sonnet-4-6", priced: true });
    expect(model).toEqual({ ...sonnet46, id: "claude-sonnet-5", name: "claude-sonnet-5" });
  });

  it("prices a model only as a new version of its own line, never a misspelling or another line", () => {
    const free = { input: 0, output: 0, cacheRead: 0, cacheWrite: 0 };
    // A misspelling is described by the model it resembles, named, and not priced as it.
    const typo = resolveModel(settings({ model: "claude-sonet-4-5" }));
    expect(typo.origin).toMatchObject({ kind: "template", template: "claude-sonnet-4-5", priced: false });
    expect(typo.origin.kind === "template" && typo.origin.misspelling?.[0]).toBe("claude-sonnet-4-5");
    expect(typo.model.cost).toEqual(free);
    const spelling = resolveModel(settings({ model: "Claude-Sonnet-4.5" }));
    expect(spelling.origin).toMatchObject({ priced: false, misspelling: ["claude-sonnet-4-5"] });
    // A new line borrows the family's figures but not its prices.
    const line = resolveModel(settings({ model: "claude-mythos-1" }));
    expect(line.origin).toMatchObject({ kind: "template", template: "claude-opus-4-7", priced: false });
    expect(line.model.cost).toEqual(free);
    // Prices config.toml gives count all the same.
    const told = resolveModel(settings({ model: "claude-mythos-1", cost: { input: 20, output: 80 } }));
    expect(told.model.cost).toEqual({ input: 20, output: 80, cacheRead: 0, cacheWrite: 0 });
    // A new snapshot of a listed model is of its line.
    expect(resolveModel(settings({ model: "claude-haiku-4-5-20260101" })).origin).toMatchObject({
      priced: true,
    });
  });

  it("applies config.toml's figures over the template", () => {
    const { model } = resolveModel(
      settings({
        model: "claude-opus-5",
        contextWindow: 2_000_000,
        maxTokens: 128_000,
        cost: { input: 10, output: 50, cacheRead: 1, cacheWrite: 12.5 },
      }),
    );
    expect(model).toMatchObject({
      id: "claude-opus-5",
      api: "anthropic-messages",
      baseUrl: "https://api.anthropic.com",
      contextWindow: 2_000_000,
      maxTokens: 128_000,
      cost: { input: 10, output: 50, cacheRead: 1, cacheWrite: 12.5 },
    });
  });

  it("behind a baseUrl, takes the template only when it speaks the endpoint's api", () => {
    const proxied = resolveModel(
      settings({ model: "claude-sonnet-5", baseUrl: "http://127.0.0.1:9", api: "anthropic-messages" }),
    );
    expect(proxied.origin).toEqual({ kind: "template", template: "claude-sonnet-4-6", priced: true });
    expect(proxied.model.baseUrl).toBe("http://127.0.0.1:9");
    // A local server named after a family the provider lists is still a custom endpoint.
    const local = resolveModel(
      settings({
        provider: "openai",
        model: "gpt-oss-20b",
        baseUrl: "http://127.0.0.1:9/v1",
        api: "openai-completions",
      }),
    );
    expect(local.origin).toEqual({ kind: "custom" });
    expect(local.model.api).toBe("openai-completions");
  });

  it("describes a custom endpoint's model as free with a 32k window unless config.toml says otherwise", () => {
    const endpoint = { provider: "local", model: "llama3.1:8b", baseUrl: "http://127.0.0.1:9/v1" } as const;
    const free = resolveModel(settings({ ...endpoint, api: "openai-completions" }));
    expect(free.origin).toEqual({ kind: "custom" });
    expect(free.model).toMatchObject({
      contextWindow: 32_768,
      maxTokens: 4_096,
      cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0 },
    });
    const priced = resolveModel(
      settings({
        ...endpoint,
        api: "openai-completions",
        contextWindow: 131_072,
        cost: { input: 0.2, output: 0.6 },
      }),
    );
    expect(priced.model).toMatchObject({
      contextWindow: 131_072,
      maxTokens: 4_096,
      cost: { input: 0.2, output: 0.6, cacheRead: 0, cacheWrite: 0 },
    });
  });

  it("refuses an id of no listed family without a baseUrl, naming the key, the closest and the way out", () => {
    const message = configError(() => resolveModel(settings({ model: "llama3.1:8b" })));
    expect(message).toContain('key "model"');
    expect(message).toContain(
      'provider "anthropic" has no model "llama3.1:8b" (none is close; it has "claude-',
    );
    expect(message).toContain('start with "claude"');
    expect(message).toContain("set baseUrl and api");
    expect(message).not.toContain("pi-ai");
  });

  it("refuses a provider it does not know without a baseUrl, with the closest names and no library's", () => {
    const typo = configError(() =>
      resolveModel(settings({ provider: "antropic", model: "claude-sonnet-4-5" })),
    );
    expect(typo).toContain('key "provider": no provider "antropic" is known (did you mean "anthropic"?)');
    expect(typo).toContain("the providers are amazon-bedrock, anthropic,");
    expect(typo).toContain("set baseUrl and api");
    expect(typo).not.toContain("pi-ai");
    const far = configError(() => resolveModel(settings({ provider: "nobody", model: "m" })));
    expect(far).toContain('no provider "nobody" is known; the providers are');
    // Behind a baseUrl, any name will do: the server's.
    const local = { model: "m", baseUrl: "http://127.0.0.1:9/v1", api: "openai-completions" } as const;
    expect(resolveModel(settings({ provider: "antropic", ...local })).origin).toEqual({ kind: "custom" });
  });

  it("refuses a window smaller than the output limit, naming the key config.toml set", () => {
    expect(
      configError(() => resolveModel(settings({ model: "claude-sonnet-5", contextWindow: 8_000 }))),
    ).toContain('key "contextWindow"');
    expect(
      configError(() => resolveModel(settings({ model: "claude-haiku-4-5", maxTokens: 300_000 }))),
    ).toContain('key "maxTokens"');
  });
});

describe("describeModel", () => {
  const describeFor = (extra: Partial<Settings>) => {
    const config = settings(extra);
    return describeModel(resolveModel(config), config);
  };

  it("says nothing of a listed model", () => {
    expect(describeFor({ model: "claude-sonnet-4-5" })).toBeUndefined();
  });

  it("warns which template stood in, with the figures, until config.toml gives them all", () => {
    const guess = describeFor({ model: "claude-sonnet-5" });
    expect(guess?.level).toBe("warn");
    expect(guess?.message).toContain(`using anthropic's "claude-sonnet-4-6" as its template`);
    expect(guess?.message).toContain("set contextWindow, maxTokens and cost");
    expect(guess?.fields).toMatchObject({
      template: "claude-sonnet-4-6",
      contextWindow: 1_000_000,
      costPerMillionTokens: { input: 3, output: 15, cacheRead: 0.3, cacheWrite: 3.75 },
    });
    const told = describeFor({
      model: "claude-sonnet-5",
      contextWindow: 500_000,
      maxTokens: 64_000,
      cost: { input: 4, output: 20, cacheRead: 0.4, cacheWrite: 5 },
    });
    expect(told?.level).toBe("info");
    expect(told?.message).toContain('"claude-sonnet-4-6"');
  });

  it("warns of a probable misspelling with the ids it resembles, and of a model it does not price", () => {
    const typo = describeFor({ model: "claude-sonet-4-5" });
    expect(typo?.level).toBe("warn");
    expect(typo?.message).toContain(
      'model "claude-sonet-4-5" is not one anthropic lists (did you mean "claude-sonnet-4-5"',
    );
    expect(typo?.message).toContain("not priced as it");
    expect(typo?.fields).toMatchObject({ didYouMean: expect.arrayContaining(["claude-sonnet-4-5"]) });
    expect(describeFor({ model: "claude-mythos-1" })?.message).toContain(
      "not priced as it: its calls count as $0 and budgets never stop them until config.toml sets cost",
    );
  });

  it("warns that a free custom endpoint escapes the budgets", () => {
    const endpoint = {
      provider: "local",
      model: "m",
      baseUrl: "http://127.0.0.1:9/v1",
      api: "openai-completions",
    } as const;
    expect(describeFor(endpoint)).toMatchObject({
      level: "info",
      message: expect.stringContaining("costs nothing"),
    });
    expect(describeFor({ ...endpoint, budget: { daily: 1 } })?.level).toBe("warn");
    const priced = describeFor({ ...endpoint, budget: { daily: 1 }, cost: { input: 1 } });
    expect(priced?.level).toBe("info");
    expect(priced?.message).not.toContain("costs nothing");
  });
});

import { getEnvApiKey, getModels, getProviders, type Api, type Model } from "@mariozechner/pi-ai";
import { ConfigError, errorMessage, type Logger } from "@stavrobot/common";
import { CredentialsFile } from "../auth/credentials-file.js";
import { OAuthKeys } from "../auth/oauth-keys.js";
import type { AppConfig } from "../boot/config.js";
import { closestNames, misspelledIds, quotedList, suggestion } from "./names.js";
import { closestModel, idParts } from "./template.js";

/** What config.toml may say about the model's limits and prices (US$ per million tokens). */
type ModelSettings = Pick<
  AppConfig,
  "provider" | "model" | "baseUrl" | "api" | "contextWindow" | "maxTokens" | "cost"
>;

const COST_KEYS = ["input", "output", "cacheRead", "cacheWrite"] as const;

/** Where the model's description came from, for the start-up log. */
export type ModelOrigin =
  /** The built-in list has the model. */
  | { kind: "listed" }
  /**
   * The list does not have it: the provider's closest listed model stood in for it. `priced`: its
   * prices were taken too, which they are only for a new version of the same line (not a new line,
   * nor a probable misspelling). `misspelling`: the listed ids the id looks like a misspelling of.
   */
  | { kind: "template"; template: string; priced: boolean; misspelling?: string[] }
  /** A custom endpoint's model, described by config.toml alone. */
  | { kind: "custom" };

export interface ResolvedModel {
  model: Model<Api>;
  origin: ModelOrigin;
}

/** A custom endpoint's model unless config.toml says otherwise: a small window, and free. */
export const CUSTOM_ENDPOINT_DEFAULTS = {
  contextWindow: 32_768,
  maxTokens: 4_096,
  cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0 },
} as const;

/** The providers the built-in model list knows, by the name config.toml gives them. */
export function knownProviders(): string[] {
  return [...(getProviders() as string[])].sort();
}

/** The models the built-in list has for `provider` (none for a provider it does not know). */
export function listedModels(provider: string): Model<Api>[] {
  if (!(getProviders() as string[]).includes(provider)) return [];
  return getModels(provider as Parameters<typeof getModels>[0]) as Model<Api>[];
}

/**
 * Why `provider` cannot be used without a baseUrl, or undefined when it can: it is not one the
 * built-in list knows, with the closest names.
 */
export function unknownProviderMessage(provider: string): string | undefined {
  const known = knownProviders();
  if (known.includes(provider)) return undefined;
  const near = closestNames(provider, known);
  return (
    `no provider "${provider}" is known${near.length > 0 ? ` (did you mean ${quotedList(near)}?)` : ""}; ` +
    `the providers are ${known.join(", ")}. For a server of your own, set baseUrl and api (see config.example.toml)`
  );
}

/** Whether a template gives its prices too: only to a new version or snapshot of its own line. */
function sameLine(id: string, template: string): boolean {
  const [a, b] = [idParts(id), idParts(template)];
  return a.family === b.family && a.words.size === b.words.size && [...a.words].every((w) => b.words.has(w));
}

/**
 * Picks the model from config: a model of the built-in list (optionally pointed at another
 * `baseUrl`); for an id the list does not have, the provider's closest listed model as a template
 * (`closestModel`), priced as it only when it is of the same line and not a probable misspelling;
 * else a hand-built model for a custom Anthropic or OpenAI-compatible endpoint. `contextWindow`,
 * `maxTokens` and `cost` from config.toml apply to each. An unknown provider without a baseUrl is
 * refused with the closest names.
 */
export function resolveModel(config: ModelSettings): ResolvedModel {
  if (!config.baseUrl) {
    const unknown = unknownProviderMessage(config.provider);
    if (unknown) throw new ConfigError(`Invalid config: key "provider": ${unknown}`);
  }
  const listed = listedModels(config.provider);
  const known = listed.find((m) => m.id === config.model);
  if (known) return { model: withSettings(known, config), origin: { kind: "listed" } };
  const misspelling = misspelledIds(
    config.model,
    listed.map((m) => m.id),
  );
  // A probable misspelling is described by the model it resembles most, a new id by its line's.
  const template = listed.find((m) => m.id === misspelling?.[0]) ?? closestModel(config.model, listed);
  // Behind a baseUrl, a template is only taken when it speaks the API that endpoint was said to.
  if (template && (!config.baseUrl || template.api === config.api)) {
    const priced = !misspelling && sameLine(config.model, template.id);
    const base = { ...template, id: config.model, name: config.model };
    if (!priced) base.cost = { ...CUSTOM_ENDPOINT_DEFAULTS.cost };
    return {
      model: withSettings(base, config),
      origin: { kind: "template", template: template.id, priced, ...(misspelling ? { misspelling } : {}) },
    };
  }
  if (!config.baseUrl) {
    const families = [...new Set(listed.map((m) => `"${idParts(m.id).family}"`))].slice(0, 8);
    const { text } = suggestion(
      config.model,
      listed.map((m) => m.id),
    );
    throw new ConfigError(
      `Invalid config: key "model": provider "${config.provider}" has no model "${config.model}"` +
        (listed.length > 0
          ? ` (${text}), and none of its family to stand in for it (its model ids start with ${families.join(", ")})`
          : "") +
        "; set baseUrl and api to use a custom endpoint (see config.example.toml)",
    );
  }
  const api = config.api ?? "openai-completions";
  const model: Model<Api> = {
    id: config.model,
    name: config.model,
    api,
    provider: config.provider,
    baseUrl: config.baseUrl,
    reasoning: false,
    input: ["text", "image"],
    ...CUSTOM_ENDPOINT_DEFAULTS,
    cost: { ...CUSTOM_ENDPOINT_DEFAULTS.cost },
  };
  if (api === "openai-completions") {
    (model as Model<"openai-completions">).compat = {
      supportsDeveloperRole: false,
      supportsStore: false,
      maxTokensField: "max_tokens",
    };
  }
  return { model: withSettings(model, config), origin: { kind: "custom" } };
}

/** A copy of `base` (the registry's objects are shared) with config.toml's settings over it. */
function withSettings(base: Model<Api>, config: ModelSettings): Model<Api> {
  const model: Model<Api> = {
    ...base,
    ...(config.baseUrl ? { baseUrl: config.baseUrl } : {}),
    ...(config.contextWindow ? { contextWindow: config.contextWindow } : {}),
    ...(config.maxTokens ? { maxTokens: config.maxTokens } : {}),
    cost: { ...base.cost },
  };
  for (const key of COST_KEYS) {
    const price = config.cost?.[key];
    if (price !== undefined) model.cost[key] = price;
  }
  // (pi-ai lists models whose two figures are equal: only what config.toml changed is checked.)
  const changed = config.maxTokens ? "maxTokens" : config.contextWindow ? "contextWindow" : undefined;
  if (changed && model.maxTokens > model.contextWindow) {
    throw new ConfigError(
      `Invalid config: key "${changed}": the model's maxTokens (${model.maxTokens}) is more than its ` +
        `contextWindow (${model.contextWindow})`,
    );
  }
  return model;
}

/**
 * The start-up log's line about a model the built-in list does not have (none for one it has):
 * where its description came from and the figures budgets and compaction go by. A template is a
 * guess, a probable misspelling is named with the ids it resembles, and a model without prices (a
 * free custom endpoint, a template of another line) escapes the budgets: warnings, until
 * config.toml gives the figures.
 */
export function describeModel(
  { model, origin }: ResolvedModel,
  config: ModelSettings & Pick<AppConfig, "budget">,
): { level: "info" | "warn"; message: string; fields: Record<string, unknown> } | undefined {
  if (origin.kind === "listed") return undefined;
  const fields = {
    model: `${model.provider}/${model.id}`,
    api: model.api,
    contextWindow: model.contextWindow,
    maxTokens: model.maxTokens,
    costPerMillionTokens: model.cost,
  };
  if (origin.kind === "template") {
    const configured =
      config.contextWindow !== undefined &&
      config.maxTokens !== undefined &&
      COST_KEYS.every((key) => config.cost?.[key] !== undefined);
    const costSet = COST_KEYS.some((key) => config.cost?.[key] !== undefined);
    const unpriced =
      origin.priced || costSet
        ? ""
        : `; not priced as it: its calls count as $0 and budgets never stop them until config.toml sets cost`;
    const head = origin.misspelling
      ? `model "${model.id}" is not one ${model.provider} lists (did you mean ${quotedList(origin.misspelling)}?): ` +
        `it is sent as written, and described by "${origin.template}"`
      : `pi-ai does not list model "${model.id}": using ${model.provider}'s "${origin.template}" as its template`;
    return {
      level: configured && !origin.misspelling ? "info" : "warn",
      message:
        head +
        unpriced +
        (configured ? "" : " (set contextWindow, maxTokens and cost in config.toml where they differ)"),
      fields: {
        ...fields,
        template: origin.template,
        ...(origin.misspelling ? { didYouMean: origin.misspelling } : {}),
      },
    };
  }
  const free = COST_KEYS.every((key) => model.cost[key] === 0);
  const budget = config.budget?.daily !== undefined || config.budget?.monthly !== undefined;
  return {
    level: free && budget ? "warn" : "info",
    message:
      `custom endpoint model "${model.id}" at ${model.baseUrl}` +
      (free ? ": it costs nothing, so budgets never stop it (set cost in config.toml to count it)" : ""),
    fields,
  };
}

export type ApiKeySource = (provider: string) => Promise<string | undefined>;

/** What a custom endpoint is sent when config.toml gives it no key (Ollama and friends need none). */
export const NO_KEY = "no-key";

export interface KeySource {
  /** Never throws (pi-agent-core's rule): undefined when there is no key. */
  getApiKey: ApiKeySource;
  /** Set when keys come from `authFile`: its login state, refresh and invalidation. */
  oauth: OAuthKeys | undefined;
}

/**
 * Where the LLM key comes from: `apiKey`, the OAuth credentials in `authFile` (renewed and written
 * back when they expire, see `OAuthKeys`), the provider's usual environment variable, or, for a
 * custom `baseUrl` (Ollama and friends need none), a placeholder.
 */
export function createApiKeySource(
  config: Pick<AppConfig, "apiKey" | "authFile" | "baseUrl">,
  options: { logger: Logger },
): KeySource {
  const oauth = config.authFile
    ? new OAuthKeys({ file: new CredentialsFile(config.authFile), logger: options.logger })
    : undefined;
  const getApiKey: ApiKeySource = async (provider) => {
    if (config.apiKey) return config.apiKey;
    if (oauth) return oauth.getApiKey(provider);
    try {
      const fromEnv = getEnvApiKey(provider);
      if (fromEnv) return fromEnv;
    } catch (error) {
      options.logger.warn("could not read the provider's key from the environment", {
        provider,
        error: errorMessage(error),
      });
    }
    return config.baseUrl ? NO_KEY : undefined;
  };
  return { getApiKey, oauth };
}

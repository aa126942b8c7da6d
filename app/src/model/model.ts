import { getEnvApiKey, getModels, getProviders, type Api, type Model } from "@mariozechner/pi-ai";
import { ConfigError, errorMessage, type Logger } from "@stavrobot/common";
import { CredentialsFile } from "../auth/credentials-file.js";
import { OAuthKeys } from "../auth/oauth-keys.js";
import type { AppConfig } from "../boot/config.js";
import { closestModel, idParts } from "./template.js";

/** What config.toml may say about the model's limits and prices (US$ per million tokens). */
type ModelSettings = Pick<
  AppConfig,
  "provider" | "model" | "baseUrl" | "api" | "contextWindow" | "maxTokens" | "cost"
>;

const COST_KEYS = ["input", "output", "cacheRead", "cacheWrite"] as const;

/** Where the model's description came from, for the start-up log. */
export type ModelOrigin =
  /** pi-ai lists the model. */
  | { kind: "listed" }
  /** pi-ai does not list it: the provider's closest listed model stood in for it. */
  | { kind: "template"; template: string }
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

function listedModels(provider: string): Model<Api>[] {
  if (!(getProviders() as string[]).includes(provider)) return [];
  return getModels(provider as Parameters<typeof getModels>[0]) as Model<Api>[];
}

/**
 * Picks the model from config: a model of pi-ai's registry (optionally pointed at another
 * `baseUrl`); for an id the registry does not list, the provider's closest listed model as a
 * template (`closestModel`); else a hand-built model for a custom Anthropic or OpenAI-compatible
 * endpoint. `contextWindow`, `maxTokens` and `cost` from config.toml apply to each.
 */
export function resolveModel(config: ModelSettings): ResolvedModel {
  const listed = listedModels(config.provider);
  const known = listed.find((m) => m.id === config.model);
  if (known) return { model: withSettings(known, config), origin: { kind: "listed" } };
  const template = closestModel(config.model, listed);
  // Behind a baseUrl, a template is only taken when it speaks the API that endpoint was said to.
  if (template && (!config.baseUrl || template.api === config.api)) {
    return {
      model: withSettings({ ...template, id: config.model, name: config.model }, config),
      origin: { kind: "template", template: template.id },
    };
  }
  if (!config.baseUrl) {
    const families = [...new Set(listed.map((m) => `"${idParts(m.id).family}"`))].slice(0, 8);
    throw new ConfigError(
      `Invalid config: key "model": pi-ai knows no model "${config.model}" for provider "${config.provider}"` +
        (listed.length > 0
          ? ` and none of its family to take as a template (that provider's model ids start with ${families.join(", ")})`
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
 * The start-up log's line about a model pi-ai does not list (none for one it lists): where its
 * description came from and the figures budgets and compaction go by. A template is a guess, and
 * a free custom endpoint escapes the budgets: warnings, until config.toml gives the figures.
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
    return {
      level: configured ? "info" : "warn",
      message:
        `pi-ai does not list model "${model.id}": using ${model.provider}'s "${origin.template}" as its template` +
        (configured ? "" : " (set contextWindow, maxTokens and cost in config.toml where they differ)"),
      fields: { ...fields, template: origin.template },
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
    return config.baseUrl ? "no-key" : undefined;
  };
  return { getApiKey, oauth };
}

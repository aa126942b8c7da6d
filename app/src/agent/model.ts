import { getEnvApiKey, getModels, getProviders, type Api, type Model } from "@mariozechner/pi-ai";
import { ConfigError, errorMessage, type Logger } from "@stavrobot/common";
import { CredentialsFile } from "../auth/credentials-file.js";
import { OAuthKeys } from "../auth/oauth-keys.js";
import type { AppConfig } from "../config.js";

/**
 * Picks the model from config: a model of pi-ai's registry (optionally pointed at another
 * `baseUrl`), or a hand-built model for a custom Anthropic or OpenAI-compatible endpoint.
 */
export function resolveModel(
  config: Pick<AppConfig, "provider" | "model" | "baseUrl" | "api" | "contextWindow" | "maxTokens">,
): Model<Api> {
  const known = (getProviders() as string[]).includes(config.provider)
    ? (getModels(config.provider as Parameters<typeof getModels>[0]) as Model<Api>[]).find(
        (m) => m.id === config.model,
      )
    : undefined;
  if (known) {
    // Copy: the registry's objects are shared.
    return {
      ...known,
      ...(config.baseUrl ? { baseUrl: config.baseUrl } : {}),
      ...(config.contextWindow ? { contextWindow: config.contextWindow } : {}),
      ...(config.maxTokens ? { maxTokens: config.maxTokens } : {}),
    };
  }
  if (!config.baseUrl) {
    throw new ConfigError(
      `Invalid config: key "model": pi-ai knows no model "${config.model}" for provider "${config.provider}"; ` +
        `set baseUrl, api, contextWindow and maxTokens to use a custom endpoint`,
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
    cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0 },
    contextWindow: config.contextWindow ?? 32_768,
    maxTokens: config.maxTokens ?? 4_096,
  };
  if (api === "openai-completions") {
    (model as Model<"openai-completions">).compat = {
      supportsDeveloperRole: false,
      supportsStore: false,
      maxTokensField: "max_tokens",
    };
  }
  return model;
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

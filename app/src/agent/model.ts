import { readFile, writeFile, rename } from "node:fs/promises";
import { getEnvApiKey, getModels, getProviders, type Api, type Model } from "@mariozechner/pi-ai";
import { getOAuthApiKey, type OAuthCredentials } from "@mariozechner/pi-ai/oauth";
import { ConfigError } from "@stavrobot/common";
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

/**
 * Where the LLM key comes from: `apiKey`, an OAuth credentials file (`authFile`, refreshed and
 * written back when it expires), the provider's usual environment variable, or, for a custom
 * `baseUrl` (Ollama and friends need none), a placeholder.
 */
export function createApiKeySource(config: Pick<AppConfig, "apiKey" | "authFile" | "baseUrl">): ApiKeySource {
  return async (provider) => {
    if (config.apiKey) return config.apiKey;
    if (config.authFile) return oauthKey(config.authFile, provider);
    const fromEnv = getEnvApiKey(provider);
    if (fromEnv) return fromEnv;
    return config.baseUrl ? "no-key" : undefined;
  };
}

async function oauthKey(path: string, provider: string): Promise<string | undefined> {
  let all: Record<string, OAuthCredentials>;
  try {
    all = JSON.parse(await readFile(path, "utf8")) as Record<string, OAuthCredentials>;
  } catch {
    return undefined;
  }
  const result = await getOAuthApiKey(provider as Parameters<typeof getOAuthApiKey>[0], all);
  if (!result) return undefined;
  if (result.newCredentials.access !== all[provider]?.access) {
    const next = { ...all, [provider]: result.newCredentials };
    await writeFile(`${path}.tmp`, JSON.stringify(next, null, 2), { mode: 0o600 });
    await rename(`${path}.tmp`, path);
  }
  return result.apiKey;
}

import type { Api, Model } from "@mariozechner/pi-ai";
import { errorMessage } from "@stavrobot/common";
import type { Check } from "./checks.js";

const TIMEOUT_MS = 5_000;

/** Why the provider check did not pass, for a caller that acts on it (the Settings page). */
export type ProviderTrouble = "no-key" | "key-refused" | "no-answer" | "provider-trouble";

export type ProviderCheck = Check & { reason?: ProviderTrouble };

export interface ProviderCheckDeps {
  model: Model<Api>;
  getApiKey: (provider: string) => Promise<string | undefined>;
  /** Keys come from a subscription login (`authFile`). */
  subscription: boolean;
  /** Why no turn can run (no key at all), in words for the owner. */
  notConfigured: string | undefined;
  configPath: string;
}

/**
 * Whether the model's provider answers and accepts the key, asked with its free model listing
 * (Messages API: `GET /v1/models`; OpenAI-compatible: `GET /models`), which costs no tokens. A
 * provider without such a call is only checked for having a key.
 */
export async function providerCheck(deps: ProviderCheckDeps): Promise<ProviderCheck> {
  const { model } = deps;
  const name = "provider";
  const where = `${model.provider}/${model.id}`;
  if (deps.notConfigured) return { name, state: "fail", detail: deps.notConfigured, reason: "no-key" };
  const key = await deps.getApiKey(model.provider).catch(() => undefined);
  if (!key) {
    return {
      name,
      state: "fail",
      detail: `${where}: no key`,
      reason: "no-key",
      fix: deps.subscription
        ? "Log in again on the /login page (the subscription login is missing or was refused)."
        : `Add apiKey = "..." to ${deps.configPath}.`,
    };
  }
  const request = listingRequest(model, key);
  if (!request) return { name, state: "ok", detail: `${where}: a key is set (${model.api} is not asked)` };
  let response: Response;
  try {
    response = await fetch(request.url, {
      headers: request.headers,
      signal: AbortSignal.timeout(TIMEOUT_MS),
    });
    await response.arrayBuffer();
  } catch (error) {
    return {
      name,
      state: "fail",
      detail: `${where}: ${request.url} did not answer (${errorMessage(error)})`,
      reason: "no-answer",
      fix: "Check the network, or baseUrl in config.toml.",
    };
  }
  if (response.ok) return { name, state: "ok", detail: `${where}: reachable, the key is accepted` };
  if (response.status === 401 || response.status === 403) {
    return {
      name,
      state: "fail",
      detail: `${where}: the provider refused the key (${response.status})`,
      reason: "key-refused",
      fix: deps.subscription
        ? "Log in again on the /login page."
        : `Check apiKey in ${deps.configPath}: the provider does not accept it.`,
    };
  }
  return {
    name,
    state: "warn",
    detail: `${where}: ${request.url} answered ${response.status}`,
    reason: "provider-trouble",
    fix: "The provider may be having trouble; turns retry by themselves.",
  };
}

function listingRequest(
  model: Model<Api>,
  key: string,
): { url: string; headers: Record<string, string> } | undefined {
  const base = model.baseUrl.replace(/\/+$/, "");
  if (model.api === "anthropic-messages") {
    // A subscription's OAuth token goes as a bearer token, an API key in x-api-key.
    const auth: Record<string, string> = key.startsWith("sk-ant-oat")
      ? { Authorization: `Bearer ${key}`, "anthropic-beta": "oauth-2025-04-20" }
      : { "x-api-key": key };
    return { url: `${base}/v1/models?limit=1`, headers: { ...auth, "anthropic-version": "2023-06-01" } };
  }
  if (model.api === "openai-completions" || model.api === "openai-responses") {
    return { url: `${base}/models`, headers: { Authorization: `Bearer ${key}` } };
  }
  return undefined;
}

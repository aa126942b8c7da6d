/**
 * The owner's choice of model provider, as the Settings page and the first start's questions make
 * it: checked with one free call to the provider (the doctor's `providerCheck`) before anything is
 * written, then written into config.toml with its comments and other keys kept.
 */
import { readFileSync } from "node:fs";
import { ConfigError, DomainError, silentLogger } from "@stavrobot/common";
import { z } from "zod";
import { providerCheck, type ProviderCheck } from "../doctor/provider.js";
import { createApiKeySource, resolveModel } from "../model/model.js";
import { setTopLevelKeys, writeConfigFile, type KeyChanges } from "./config-edit.js";
import { parseConfig, type AppConfig } from "./config.js";

export const API_KINDS = ["anthropic-messages", "openai-completions"] as const;

/** What the owner chooses; the key is never shown back, so leaving it out keeps the one set. */
export const providerChoiceSchema = z.strictObject({
  provider: z.string().trim().min(1, "name a provider").max(100),
  model: z.string().trim().min(1, "name a model").max(200),
  /** A new key; `null` removes the one in config.toml; absent keeps it. */
  apiKey: z.string().trim().min(1, "an empty key: leave it out to keep the one set").max(4096).nullish(),
  /** A local model's or another compatible server's address; absent for the provider's own. */
  baseUrl: z
    .url("must be an address such as http://localhost:11434/v1")
    .refine((value) => /^https?:\/\//.test(value), "must start with http:// or https://")
    .optional(),
  /** How that server is spoken to; required with baseUrl. */
  api: z.enum(API_KINDS).optional(),
});

export type ProviderChoice = z.infer<typeof providerChoiceSchema>;

/** The parts of config.toml that pick the model and its key. */
export interface ProviderFields {
  provider: string;
  model: string;
  baseUrl: string | undefined;
  api: string | undefined;
  apiKey: string | undefined;
  authFile: string | undefined;
}

export function providerFields(config: Readonly<AppConfig>): ProviderFields {
  const { provider, model, baseUrl, api, apiKey, authFile } = config;
  return { provider, model, baseUrl, api, apiKey, authFile };
}

export interface CheckedChoice {
  /** config.toml's text with the choice in it. */
  text: string;
  config: Readonly<AppConfig>;
  check: ProviderCheck;
}

/**
 * config.toml's `text` with `choice` in it, read as the app reads it and checked with the
 * provider; throws a DomainError (`invalid`, with `reason`) when the config would not start or
 * the provider refuses the key, `upstream` when it did not answer. Nothing is written.
 */
export async function checkProviderChoice(
  text: string,
  choice: ProviderChoice,
  configPath: string,
): Promise<CheckedChoice> {
  if (choice.baseUrl && !choice.api) {
    throw new DomainError(
      "invalid",
      'Say how the server at baseUrl is spoken to: "api" is required with it.',
      {
        reason: "invalid-config",
      },
    );
  }
  const changes: Record<string, string | undefined> = {
    provider: choice.provider,
    model: choice.model,
    baseUrl: choice.baseUrl,
    api: choice.baseUrl ? choice.api : undefined,
  };
  // A key of its own replaces a subscription login (config.toml takes one or the other).
  if (typeof choice.apiKey === "string")
    Object.assign(changes, { apiKey: choice.apiKey, authFile: undefined });
  if (choice.apiKey === null) changes.apiKey = undefined;
  const next = setTopLevelKeys(text, changes as KeyChanges);
  let config: Readonly<AppConfig>;
  let model;
  try {
    config = parseConfig(next, "config.toml");
    model = resolveModel(config).model;
  } catch (error) {
    if (error instanceof ConfigError) {
      throw new DomainError("invalid", error.message, { reason: "invalid-config" });
    }
    throw error;
  }
  const { getApiKey, oauth } = createApiKeySource(config, { logger: silentLogger });
  const key = oauth ? undefined : await getApiKey(model.provider);
  const check = await providerCheck({
    model,
    getApiKey,
    subscription: oauth !== undefined,
    notConfigured:
      oauth || key ? undefined : `${model.provider}/${model.id} needs a key: none is set for it.`,
    configPath,
  });
  if (check.state !== "ok") {
    const reason = check.reason ?? "provider-trouble";
    const kind = reason === "no-answer" || reason === "provider-trouble" ? "upstream" : "invalid";
    throw new DomainError(kind, check.detail, { reason, fix: check.fix });
  }
  return { text: next, config, check };
}

/** Checks the choice against config.toml at `configPath` and writes it there once the provider accepted it. */
export async function saveProviderChoice(configPath: string, choice: ProviderChoice): Promise<CheckedChoice> {
  const checked = await checkProviderChoice(readFileSync(configPath, "utf8"), choice, configPath);
  writeConfigFile(configPath, checked.text);
  return checked;
}

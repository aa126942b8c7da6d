/**
 * The owner's choice of model provider, as the Settings page and the first start's questions make
 * it: checked with the provider (the doctor's `providerCheck`: its free model list, or one tiny
 * request to a server without one) before anything is written, then written into config.toml with
 * its comments and other keys kept. A choice the check refuses may still be saved on purpose.
 */
import { readFileSync } from "node:fs";
import { ConfigError, DomainError, silentLogger } from "@stavrobot/common";
import { z } from "zod";
import { providerCheck, type ProviderCheck } from "../doctor/provider.js";
import { createApiKeySource, knownProviders, resolveModel, unknownProviderMessage } from "../model/model.js";
import { closestNames } from "../model/names.js";
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
  /** Write it even though the provider's check did not pass (it is still made, and said). */
  saveAnyway: z.boolean().optional(),
});

export type ProviderChoice = z.infer<typeof providerChoiceSchema>;

/**
 * An address as typed into the first start's questions, made what config.toml takes: `http://`
 * in front of one without a scheme (`localhost:4151`); an error saying why when it cannot be one
 * (another scheme, no host).
 */
export function typedAddress(typed: string): { url: string; note?: string } | { error: string } {
  const text = typed.trim();
  const withScheme = /^[a-z][a-z0-9+.-]*:\/\//i.test(text) ? text : `http://${text}`;
  if (!/^https?:\/\//i.test(withScheme)) return { error: `"${text}" is not an http:// or https:// address.` };
  try {
    const url = new URL(withScheme);
    if (!url.hostname) return { error: `"${text}" names no host.` };
  } catch {
    return { error: `"${text}" is not an address (e.g. http://localhost:11434/v1).` };
  }
  return withScheme === text ? { url: text } : { url: withScheme, note: `taken as ${withScheme}` };
}

/**
 * `baseUrl` as the chosen API needs it: an Anthropic-compatible address without the `/v1` its
 * client adds itself (`…/v1` would be asked at `…/v1/v1/messages`); with a note saying so.
 */
export function baseUrlForApi(baseUrl: string, api: string | undefined): { url: string; note?: string } {
  if (api !== "anthropic-messages") return { url: baseUrl };
  const stripped = baseUrl.replace(/\/v1\/*$/, "");
  if (stripped === baseUrl) return { url: baseUrl };
  return {
    url: stripped,
    note: `the address is taken without /v1 (${stripped}): Anthropic's API adds /v1 itself`,
  };
}

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
  /** What was changed in what the owner typed (an address's /v1), in words. */
  notes: string[];
  /** Saved although the check did not pass (`saveAnyway`). */
  unchecked: boolean;
}

/**
 * config.toml's `text` with `choice` in it, read as the app reads it and checked with the
 * provider; throws a DomainError (`invalid`, with `reason`) when the config would not start, the
 * provider is unknown, or the provider refuses the key or does not know the model (`suggestions`:
 * the closest names), `upstream` when it did not answer. A choice the check did not pass is still
 * returned with `saveAnyway`, unless it would not start. Nothing is written.
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
  if (!choice.baseUrl) {
    const unknown = unknownProviderMessage(choice.provider);
    if (unknown) {
      throw new DomainError("invalid", `${unknown[0]?.toUpperCase()}${unknown.slice(1)}.`, {
        reason: "unknown-provider",
        suggestions: closestNames(choice.provider, knownProviders()),
      });
    }
  }
  const notes: string[] = [];
  const address = choice.baseUrl ? baseUrlForApi(choice.baseUrl, choice.api) : undefined;
  if (address?.note) notes.push(address.note);
  const changes: Record<string, string | undefined> = {
    provider: choice.provider,
    model: choice.model,
    baseUrl: address?.url,
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
    ownServer: config.baseUrl !== undefined,
    probe: {},
  });
  if (check.state !== "ok" && !choice.saveAnyway) {
    const reason = check.reason ?? "provider-trouble";
    const kind = reason === "no-answer" || reason === "provider-trouble" ? "upstream" : "invalid";
    throw new DomainError(kind, check.detail, {
      reason,
      fix: check.fix,
      ...(check.suggestions ? { suggestions: check.suggestions } : {}),
      // It would start, and the owner may know better (a server that is down for now, a model
      // the provider's list leaves out): they may write it all the same.
      saveAnyway: true,
      notes,
    });
  }
  return { text: next, config, check, notes, unchecked: check.state !== "ok" };
}

/** Checks the choice against config.toml at `configPath` and writes it there once the provider accepted it. */
export async function saveProviderChoice(configPath: string, choice: ProviderChoice): Promise<CheckedChoice> {
  const checked = await checkProviderChoice(readFileSync(configPath, "utf8"), choice, configPath);
  writeConfigFile(configPath, checked.text);
  return checked;
}

import type { Api, Model } from "@mariozechner/pi-ai";
import { listedModels, NO_KEY } from "../model/model.js";
import { misspelledIds, quotedList, suggestion } from "../model/names.js";
import type { Check } from "./checks.js";
import { lookUpModel, NoAnswer, probeModel, type ModelLookup, type ProbeAnswer } from "./provider-wire.js";

/** Why the provider check did not pass, for a caller that acts on it (the Settings page, the first start). */
export type ProviderTrouble =
  | "no-key"
  | "key-refused"
  | "no-answer"
  | "provider-trouble"
  /** The provider does not know the model (`suggestions`: the closest names it has). */
  | "unknown-model"
  /** Nothing serves the address (404 for the model list and for a request). */
  | "wrong-address";

export type ProviderCheck = Check & { reason?: ProviderTrouble; suggestions?: string[] };

export interface ProviderCheckDeps {
  model: Model<Api>;
  getApiKey: (provider: string) => Promise<string | undefined>;
  /** Keys come from a subscription login (`authFile`). */
  subscription: boolean;
  /** Why no turn can run (no key at all), in words for the owner. */
  notConfigured: string | undefined;
  configPath: string;
  /** config.toml sets baseUrl: a server of the owner's, which a failure names (not the network). */
  ownServer: boolean;
  /**
   * Where the server lists no models: ask it with one tiny real request (a token or so), or leave
   * it at a warning. With `remembered`, a request that worked is not sent again for the same model,
   * address and key (Home asks for the checks every few minutes).
   */
  probe: false | { remembered?: Map<string, ProviderCheck> };
}

const name = "provider";

/**
 * Whether the model's provider answers, accepts the key and knows the model: asked with its free
 * model listing, or (a server without one, when `probe` allows) one tiny real request. A provider
 * whose API has no such question is only checked for a key, and the model against the built-in list.
 */
export async function providerCheck(deps: ProviderCheckDeps): Promise<ProviderCheck> {
  const { model } = deps;
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
  const accepted = key === NO_KEY ? "reachable, no key needed" : "reachable, the key is accepted";
  try {
    const lookup = await lookUpModel(model, key);
    if (lookup.kind === "no-list") return await withoutList(deps, key, lookup.url, accepted);
    return fromLookup(deps, lookup, accepted);
  } catch (error) {
    if (!(error instanceof NoAnswer)) throw error;
    return noAnswer(deps, error);
  }
}

function fromLookup(
  deps: ProviderCheckDeps,
  lookup: Exclude<ModelLookup, { kind: "no-list" }>,
  accepted: string,
): ProviderCheck {
  const { model } = deps;
  const where = `${model.provider}/${model.id}`;
  switch (lookup.kind) {
    case "known":
      return { name, state: "ok", detail: `${where}: ${accepted}` };
    case "refused":
      return keyRefused(deps, lookup.status);
    case "unknown":
      return unknownModel(deps, lookup.ids, `the provider lists no model "${model.id}"`);
    case "trouble":
      return {
        name,
        state: "warn",
        detail: `${where}: ${lookup.url} answered ${lookup.status}${lookup.message ? ` (${lookup.message})` : ""}`,
        reason: "provider-trouble",
        fix: "The provider may be having trouble; turns retry by themselves.",
      };
    case "not-asked": {
      // No free question to ask: the name is checked against the built-in list alone.
      const listed = listedModels(model.provider).map((m) => m.id);
      const misspelling = listed.includes(model.id) ? undefined : misspelledIds(model.id, listed);
      if (misspelling) {
        return {
          name,
          state: "warn",
          detail: `${where}: a key is set; "${model.id}" is not a model ${model.provider} is known to have (did you mean ${quotedList(misspelling)}?)`,
          reason: "unknown-model",
          suggestions: misspelling,
          fix: `Set model to the one you mean in ${deps.configPath} or on the Settings page.`,
        };
      }
      return { name, state: "ok", detail: `${where}: a key is set (${model.api} is not asked)` };
    }
  }
}

/** A server without a model list (404): one tiny request tells a wrong address from a working server. */
async function withoutList(
  deps: ProviderCheckDeps,
  key: string,
  listUrl: string,
  accepted: string,
): Promise<ProviderCheck> {
  const { model } = deps;
  const where = `${model.provider}/${model.id}`;
  if (!deps.probe) {
    return {
      name,
      state: "warn",
      detail: `${where}: ${listUrl} answered 404: the server lists no models, or the address is wrong`,
      reason: "wrong-address",
      fix: addressFix(deps),
    };
  }
  const memoKey = `${model.baseUrl} ${model.api} ${model.id} ${key}`;
  const remembered = deps.probe.remembered?.get(memoKey);
  if (remembered) return remembered;
  const answer: ProbeAnswer = await probeModel(model, key);
  const check = fromProbe(deps, answer, accepted);
  if (check.state === "ok") deps.probe.remembered?.set(memoKey, check);
  return check;
}

function fromProbe(deps: ProviderCheckDeps, answer: ProbeAnswer, accepted: string): ProviderCheck {
  const { model } = deps;
  const where = `${model.provider}/${model.id}`;
  switch (answer.kind) {
    case "answered":
      return {
        name,
        state: "ok",
        detail: `${where}: ${accepted} (the server lists no models; it answered a one-token request)`,
      };
    case "refused":
      return keyRefused(deps, answer.status);
    case "unknown-model":
      return unknownModel(deps, [], `the server does not know model "${model.id}" (${answer.message})`);
    case "wrong-address":
      return {
        name,
        state: "fail",
        detail: `${where}: nothing answers at ${model.baseUrl} (404 for its model list and for a request): the address is wrong`,
        reason: "wrong-address",
        fix: addressFix(deps),
      };
    case "trouble":
      return {
        name,
        state: "fail",
        detail: `${where}: ${answer.url} answered ${answer.status}${answer.message ? ` (${answer.message})` : ""}`,
        reason: "provider-trouble",
        fix: "Check the model's name and the server's log: the server refused a one-token request.",
      };
  }
}

function addressFix(deps: ProviderCheckDeps): string {
  return deps.model.api === "anthropic-messages"
    ? "Check baseUrl: an Anthropic-compatible server's address is given without /v1 (the client adds /v1/messages)."
    : "Check baseUrl: an OpenAI-compatible server's address usually ends in /v1 (e.g. http://localhost:11434/v1).";
}

function keyRefused(deps: ProviderCheckDeps, status: number): ProviderCheck {
  const where = `${deps.model.provider}/${deps.model.id}`;
  return {
    name,
    state: "fail",
    detail: `${where}: the provider refused the key (${status})`,
    reason: "key-refused",
    fix: deps.subscription
      ? "Log in again on the /login page."
      : `Check apiKey in ${deps.configPath}: the provider does not accept it.`,
  };
}

function unknownModel(deps: ProviderCheckDeps, ids: string[], said: string): ProviderCheck {
  const where = `${deps.model.provider}/${deps.model.id}`;
  const { names, text } = suggestion(deps.model.id, ids);
  return {
    name,
    state: "warn",
    detail: `${where}: ${said}${text ? ` (${text})` : ""}`,
    reason: "unknown-model",
    suggestions: names,
    fix: `Set model to one the provider has${names[0] ? `, e.g. "${names[0]}"` : ""}, in ${deps.configPath} or on the Settings page.`,
  };
}

function noAnswer(deps: ProviderCheckDeps, error: NoAnswer): ProviderCheck {
  const { model } = deps;
  return {
    name,
    state: "fail",
    detail: `${model.provider}/${model.id}: ${error.message}`,
    reason: "no-answer",
    fix: deps.ownServer
      ? `Check that the server at ${model.baseUrl} is running, and its address (baseUrl in ${deps.configPath}).`
      : `Check this machine's network connection: ${new URL(model.baseUrl).host} did not answer.`,
  };
}

import type { Api, Model } from "@mariozechner/pi-ai";
import type { Logger } from "@stavrobot/common";
import type { AppConfig } from "../boot/config.js";
import { openModelClient, type ModelClient } from "./client.js";
import {
  createApiKeySource,
  describeModel,
  resolveModel,
  type ApiKeySource,
  type KeySource,
} from "./model.js";

/** The model wing: which model, its key, and the client every model call goes through. */
export interface ModelWing {
  model: Model<Api>;
  getApiKey: ApiKeySource;
  /** Set with `authFile`: the subscription login's keys, renewed in the background. */
  oauth: KeySource["oauth"];
  /** Why no turn can run yet (no key at all), in words for the owner; undefined when one can. */
  notConfigured: string | undefined;
  client: ModelClient;
  /**
   * Uses `key` from the next model call on (the Settings page saved a new key for this very model):
   * a key is all a turn reads at each call, so no restart is needed for it.
   */
  useKey(key: string): void;
}

/**
 * Resolves the configured model (a template for one pi-ai does not list, logged), finds its key,
 * and opens its client and a connection to its host while the rest of the app starts.
 */
export async function wireModel(options: {
  config: Readonly<AppConfig>;
  configPath: string;
  logger: Logger;
}): Promise<ModelWing> {
  const { config, configPath, logger } = options;
  const resolved = resolveModel(config);
  const model = resolved.model;
  const note = describeModel(resolved, config);
  if (note) logger[note.level](note.message, note.fields);
  const source = createApiKeySource(config, { logger: logger.child("auth") });
  const { oauth } = source;
  // A key saved on the Settings page since the start goes before config.toml's of the start.
  let savedKey: string | undefined;
  const getApiKey: ApiKeySource = async (provider) => savedKey ?? source.getApiKey(provider);
  // A key from authFile is not a start-up matter: a missing or broken login is fixed at /login
  // without a restart, and a turn meanwhile says so. Nothing here waits for a refresh.
  const startKey = oauth ? undefined : await getApiKey(model.provider);
  const notConfigured =
    oauth || startKey
      ? undefined
      : `The assistant has no LLM provider key yet. Set one on the Settings page (/settings), or add ` +
        `apiKey = "..." (or authFile) to ${configPath} and restart.`;
  if (notConfigured) logger.warn(notConfigured);
  const wing: ModelWing = {
    model,
    getApiKey,
    oauth,
    notConfigured,
    client: openModelClient(model, startKey),
    useKey(key) {
      savedKey = key;
      wing.notConfigured = undefined;
      logger.info("using the key saved on the Settings page", { model: `${model.provider}/${model.id}` });
    },
  };
  return wing;
}

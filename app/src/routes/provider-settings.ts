import { readFileSync } from "node:fs";
import { getModels, getProviders } from "@mariozechner/pi-ai";
import { ConfigError, DomainError, SerialLock, readValidJson, type Router } from "@stavrobot/common";
import { parseConfig } from "../boot/config.js";
import {
  API_KINDS,
  providerChoiceSchema,
  providerFields,
  saveProviderChoice,
  type ProviderFields,
} from "../boot/provider-choice.js";

export interface ProviderSettingsDeps {
  configPath: string;
  /** What the running model was started with (config.toml's at the start). */
  running: ProviderFields;
  /** Hands a new key of the running model to the model's client (no restart needed for it). */
  useKey(key: string): void;
}

/** Whether two choices pick the same model at the same place (they may differ in their key). */
const sameModel = (a: ProviderFields, b: ProviderFields): boolean =>
  a.provider === b.provider && a.model === b.model && a.baseUrl === b.baseUrl && a.api === b.api;

const sameAll = (a: ProviderFields, b: ProviderFields): boolean =>
  sameModel(a, b) && a.apiKey === b.apiKey && a.authFile === b.authFile;

/**
 * `GET/PUT /api/settings/provider` (owner's password): the model's provider, model, key and local
 * endpoint as config.toml has them (the key only as whether one is set), and the owner's new
 * choice, checked with the provider before it is written. A new key for the running model is used
 * at once; another model or endpoint from the next start, which the answer says.
 * `GET /api/settings/provider/models?provider=` lists the models pi-ai knows for one provider.
 */
export function addProviderSettingsRoutes(router: Router, deps: ProviderSettingsDeps): void {
  // What is in use now: the start's, with a key handed over since.
  const live: ProviderFields = { ...deps.running };
  const writes = new SerialLock();
  const fileFields = (): ProviderFields => {
    try {
      return providerFields(parseConfig(readFileSync(deps.configPath, "utf8"), deps.configPath));
    } catch (error) {
      if (error instanceof ConfigError)
        throw new DomainError("conflict", error.message, { reason: "invalid-config" });
      throw error;
    }
  };
  router
    .get("/api/settings/provider", async () => {
      const file = fileFields();
      return {
        json: {
          provider: file.provider,
          model: file.model,
          baseUrl: file.baseUrl ?? null,
          api: file.api ?? null,
          keySet: file.apiKey !== undefined,
          subscription: file.authFile !== undefined,
          running: { provider: live.provider, model: live.model, baseUrl: live.baseUrl ?? null },
          restartNeeded: !sameAll(file, live),
          providers: [...getProviders()].sort(),
          apis: API_KINDS,
        },
      };
    })
    .get("/api/settings/provider/models", async ({ url }) => {
      const provider = url.searchParams.get("provider") ?? "";
      const known = (getProviders() as string[]).includes(provider);
      const models = known
        ? getModels(provider as Parameters<typeof getModels>[0]).map((model) => model.id)
        : [];
      return { json: { provider, models: models.sort() } };
    })
    .add("PUT", "/api/settings/provider", async ({ req }) => {
      const choice = await readValidJson(req, 16 * 1024, providerChoiceSchema);
      return writes.run(async () => {
        const { config, check } = await saveProviderChoice(deps.configPath, choice);
        const saved = providerFields(config);
        if (sameModel(saved, live) && saved.apiKey !== undefined && saved.apiKey !== live.apiKey) {
          deps.useKey(saved.apiKey);
          live.apiKey = saved.apiKey;
          live.authFile = saved.authFile;
        }
        const restartNeeded = !sameAll(saved, live);
        return {
          json: {
            saved: true,
            restartNeeded,
            check: { state: check.state, detail: check.detail },
            message: restartNeeded
              ? `Saved in config.toml and checked (${check.detail}). Restart the assistant to use it.`
              : `Saved in config.toml and checked (${check.detail}). In use now.`,
          },
        };
      });
    });
}

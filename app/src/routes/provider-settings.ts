import { getModels, getProviders } from "@mariozechner/pi-ai";
import { ConfigError, DomainError, SerialLock, readValidJson, type Router } from "@stavrobot/common";
import {
  API_KINDS,
  providerChoiceSchema,
  providerFields,
  saveProviderChoice,
  type ProviderFields,
} from "../boot/provider-choice.js";
import { loadConfig } from "../boot/config.js";
import { sameModel, type ProviderInUse } from "../boot/provider-in-use.js";
import { resolveModel } from "../model/model.js";

export interface ProviderSettingsDeps {
  /** What runs (config.toml's at the start, and a key handed over since) and what config.toml holds. */
  provider: ProviderInUse;
  configPath: string;
  /** Hands a new key of the running model to the model's client (no restart needed for it). */
  useKey(key: string): void;
  /**
   * Restarts the assistant in this process (config.toml read again), once this answer has gone;
   * undefined where nothing can restart it (an app a test started by itself).
   */
  restart: (() => void) | undefined;
  /** The app's environment: config.toml is read with it, as the restart will read it. */
  env: NodeJS.ProcessEnv;
}

/**
 * `GET/PUT /api/settings/provider` (owner's password): the model's provider, model, key and local
 * endpoint as config.toml has them (the key only as whether one is set), and the owner's new
 * choice, checked with the provider before it is written (`saveAnyway` writes one the check did
 * not pass). A new key for the running model is used at once; another model or endpoint after a
 * restart, which the answer says and `POST /api/settings/restart` does.
 * `GET /api/settings/provider/models?provider=` lists the models the built-in list has for one provider.
 */
export function addProviderSettingsRoutes(router: Router, deps: ProviderSettingsDeps): void {
  const { live } = deps.provider;
  const writes = new SerialLock();
  const fileFields = (): ProviderFields => {
    try {
      return deps.provider.inFile();
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
          restartNeeded: deps.provider.differs(file),
          canRestart: deps.restart !== undefined,
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
        const { config, check, notes, unchecked } = await saveProviderChoice(deps.configPath, choice);
        const saved = providerFields(config);
        if (sameModel(saved, live) && saved.apiKey !== undefined && saved.apiKey !== live.apiKey) {
          deps.useKey(saved.apiKey);
          live.apiKey = saved.apiKey;
          live.authFile = saved.authFile;
        }
        const restartNeeded = deps.provider.differs(saved);
        const said = [
          unchecked
            ? `Saved in config.toml as it is, unchecked: ${check.detail}.`
            : `Saved in config.toml and checked (${check.detail}).`,
          ...notes.map((note) => `Note: ${note}.`),
          restartNeeded ? "It is used after a restart." : "In use now.",
        ];
        return {
          json: {
            saved: true,
            unchecked,
            restartNeeded,
            canRestart: deps.restart !== undefined,
            check: { state: check.state, detail: check.detail },
            message: said.join(" "),
          },
        };
      });
    })
    .post("/api/settings/restart", async () => {
      const restart = deps.restart;
      if (!restart) {
        throw new DomainError(
          "unavailable",
          "This assistant cannot restart itself here: stop it and start it again.",
        );
      }
      // A config.toml that would not start (broken by hand since) would end the process: refused.
      try {
        resolveModel(loadConfig(deps.configPath, deps.env));
      } catch (error) {
        if (!(error instanceof ConfigError)) throw error;
        throw new DomainError("conflict", `Not restarted: config.toml would not start. ${error.message}`, {
          reason: "invalid-config",
        });
      }
      // Once this answer has gone (closing the server waits for it).
      setTimeout(restart, 0);
      return {
        status: 202,
        json: { restarting: true, message: "Restarting: the assistant reads config.toml again." },
      };
    });
}

import { readFileSync } from "node:fs";
import { z } from "zod";
import { ConfigError, DomainError, SerialLock, readValidJson, type Router } from "@stavrobot/common";
import { removeTable, setTableKeys, writeConfigFile } from "../boot/config-edit.js";
import { parseConfig, type AppConfig } from "../boot/config.js";
import { embeddingsCheck } from "../doctor/embeddings.js";
import { createEmbeddingsClient } from "../embeddings/client.js";

/** A text field: left out, kept as written; empty, removed from config.toml. */
const text = z.string().trim().max(500).optional();

const formSchema = z.strictObject({
  /** Search by words only: `[embeddings]` is removed. */
  off: z.boolean().default(false),
  baseUrl: text,
  model: text,
  /** Absent: the key in config.toml is kept; "": removed (local servers need none). */
  apiKey: z.string().max(500).optional(),
  dimensions: z.union([z.number().int().min(1).max(8192), z.literal("")]).optional(),
  queryPrefix: z.string().max(200).optional(),
  documentPrefix: z.string().max(200).optional(),
  /** `[memory] autoRecall`. */
  autoRecall: z.boolean().optional(),
  /** Write it even when the endpoint did not answer as it should. */
  saveAnyway: z.boolean().default(false),
});

function readConfig(path: string): { text: string; config: Readonly<AppConfig> } {
  const text = readFileSync(path, "utf8");
  try {
    return { text, config: parseConfig(text, path) };
  } catch (error) {
    if (error instanceof ConfigError)
      throw new DomainError("conflict", error.message, { reason: "invalid-config" });
    throw error;
  }
}

/**
 * `GET/PUT /api/settings/embeddings` (owner's password): search by meaning's `[embeddings]` and
 * `[memory] autoRecall` as config.toml has them (the key only as whether one is set), and the
 * owner's new settings, checked with one small call to the endpoint before they are written
 * (`saveAnyway` writes them regardless; `off` removes the table). Used after a restart.
 */
export function addEmbeddingsSettingsRoutes(router: Router, deps: { configPath: string }): void {
  const writes = new SerialLock();
  router
    .get("/api/settings/embeddings", async () => {
      const { config } = readConfig(deps.configPath);
      const embeddings = config.embeddings;
      return {
        json: {
          configured: embeddings !== undefined,
          baseUrl: embeddings?.baseUrl ?? "",
          model: embeddings?.model ?? "",
          apiKeySet: embeddings?.apiKey !== undefined,
          dimensions: embeddings?.dimensions ?? "",
          queryPrefix: embeddings?.queryPrefix ?? "",
          documentPrefix: embeddings?.documentPrefix ?? "",
          autoRecall: config.memory?.autoRecall ?? true,
        },
      };
    })
    .add("PUT", "/api/settings/embeddings", async ({ req }) => {
      const form = await readValidJson(req, 16 * 1024, formSchema);
      return writes.run(async () => {
        const { text: current } = readConfig(deps.configPath);
        const { off, saveAnyway, autoRecall, ...fields } = form;
        let next: string;
        if (off) next = removeTable(current, "embeddings");
        else {
          const changes: Record<string, string | number | undefined> = {};
          for (const [key, field] of Object.entries(fields)) {
            if (field !== undefined) changes[key] = field === "" ? undefined : field;
          }
          next = setTableKeys(current, "embeddings", changes);
        }
        if (autoRecall !== undefined) next = setTableKeys(next, "memory", { autoRecall });
        let config: Readonly<AppConfig>;
        try {
          config = parseConfig(next, deps.configPath);
        } catch (error) {
          if (error instanceof ConfigError) throw new DomainError("invalid", `Not saved: ${error.message}`);
          throw error;
        }
        const check = config.embeddings
          ? await embeddingsCheck({ client: createEmbeddingsClient(config.embeddings) })
          : undefined;
        if (check && check.state !== "ok" && !saveAnyway) {
          throw new DomainError("conflict", `Not saved: ${check.detail}. Correct it, or save anyway.`, {
            check,
          });
        }
        writeConfigFile(deps.configPath, next);
        return {
          json: {
            saved: true,
            ...(check ? { check } : {}),
            restartNeeded: true,
            message: config.embeddings
              ? `Saved in config.toml${check?.state === "ok" ? ` and checked (${check.detail})` : ", unchecked"}. It is used after a restart.`
              : "Search by meaning is off in config.toml: db_search finds the words used. It is used after a restart.",
          },
        };
      });
    });
}

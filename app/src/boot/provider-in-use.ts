import { readFileSync } from "node:fs";
import { ConfigError } from "@stavrobot/common";
import type { Check } from "../doctor/checks.js";
import { parseConfig } from "./config.js";
import { providerFields, type ProviderFields } from "./provider-choice.js";

/** Whether two choices pick the same model at the same place (they may differ in their key). */
export const sameModel = (a: ProviderFields, b: ProviderFields): boolean =>
  a.provider === b.provider && a.model === b.model && a.baseUrl === b.baseUrl && a.api === b.api;

const sameAll = (a: ProviderFields, b: ProviderFields): boolean =>
  sameModel(a, b) && a.apiKey === b.apiKey && a.authFile === b.authFile;

/** What the owner is told while config.toml holds a provider the running assistant does not use yet. */
export const RESTART_TO_USE =
  "A provider saved on the Settings page is used after a restart: restart the assistant (Restart now, on Home or the Settings page).";

/**
 * The model provider in use (config.toml's at the start, with a key handed over since) and the
 * one config.toml holds now: when they differ, a restart is needed to use the file's, which the
 * Settings page, Home and `/chat` say.
 */
export class ProviderInUse {
  readonly live: ProviderFields;

  constructor(
    private readonly configPath: string,
    running: ProviderFields,
  ) {
    this.live = { ...running };
  }

  /** config.toml's provider fields now; throws ConfigError when the file was broken by hand. */
  inFile(): ProviderFields {
    return providerFields(parseConfig(readFileSync(this.configPath, "utf8"), this.configPath));
  }

  /** Whether config.toml holds a choice the running assistant does not use (false when it cannot be read). */
  restartNeeded(): boolean {
    try {
      return !sameAll(this.inFile(), this.live);
    } catch (error) {
      if (error instanceof ConfigError || (error as NodeJS.ErrnoException).code === "ENOENT") return false;
      throw error;
    }
  }

  /** Whether `saved` differs from what runs, once a key handed over in place is counted. */
  differs(saved: ProviderFields): boolean {
    return !sameAll(saved, this.live);
  }
}

/**
 * The doctor's provider check, saying so when config.toml holds a provider the running assistant
 * does not use yet (`restartNeeded`: Home offers the restart).
 */
export function withRestartNeeded<T extends Check>(
  check: T,
  restartNeeded: boolean,
): T & { restartNeeded?: true } {
  if (!restartNeeded) return check;
  return {
    ...check,
    detail: `${check.detail} (config.toml holds another provider, used after a restart)`,
    fix: RESTART_TO_USE,
    restartNeeded: true,
  };
}

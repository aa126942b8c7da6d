import { readFile } from "node:fs/promises";
import { DomainError, writeFileAtomic } from "@stavrobot/common";
import type { Plugin } from "./formats/format.js";

/**
 * Which plugins' processes have network. A plugin has it when its format says so (Cyclop One:
 * only with the `network` permission; Stavrobot and Workbench declare nothing and keep it) and the
 * owner has not switched it off. The owner can switch it off for any plugin, and on again only
 * for one that may have it. Where the sandbox cannot remove the network (plain mode), a plugin
 * that must run without it runs only if the owner's configuration allows it.
 */
export class NetworkPolicy {
  private owner = new Map<string, boolean>();

  constructor(
    private readonly file: string,
    /** Whether the sandbox removes the network (namespaces mode). */
    readonly enforced: boolean,
    /** The owner's configuration lets plugins that must run without network run anyway where it cannot be cut. */
    readonly allowWithoutCut: boolean,
  ) {}

  async load(): Promise<void> {
    const raw = await readFile(this.file, "utf8").catch(() => undefined);
    if (raw === undefined) return;
    for (const [name, value] of Object.entries(JSON.parse(raw) as Record<string, unknown>)) {
      if (typeof value === "boolean") this.owner.set(name, value);
    }
  }

  /** Whether the plugin's processes get network. */
  allows(plugin: Pick<Plugin, "name" | "network">): boolean {
    return plugin.network && this.owner.get(plugin.name) !== false;
  }

  /** Whether the owner switched the plugin's network off. */
  switchedOff(name: string): boolean {
    return this.owner.get(name) === false;
  }

  /** Why the plugin cannot run here, or undefined when it can. */
  refusal(plugin: Pick<Plugin, "name" | "network">): string | undefined {
    if (this.allows(plugin) || this.enforced || this.allowWithoutCut) return undefined;
    return (
      `Plugin "${plugin.name}" must run without network, and this machine's sandbox cannot remove the network ` +
      "(it runs in plain mode: no bubblewrap, and not root for util-linux unshare), so it does not run. " +
      "The owner can install bubblewrap, or allow such plugins anyway with [plugins] allowWithoutNetworkCut = true in config.toml."
    );
  }

  /** The owner's switch. On is refused for a plugin whose format gives it no network. */
  async set(plugin: Plugin, on: boolean): Promise<void> {
    if (on && !plugin.network) {
      throw new DomainError(
        "invalid",
        `Plugin "${plugin.name}" did not ask for network (its permissions do not include "network"), so it runs without it.`,
      );
    }
    if (on) this.owner.delete(plugin.name);
    else this.owner.set(plugin.name, false);
    await this.save();
  }

  async remove(name: string): Promise<void> {
    if (this.owner.delete(name)) await this.save();
  }

  private async save(): Promise<void> {
    await writeFileAtomic(this.file, JSON.stringify(Object.fromEntries(this.owner), null, 2) + "\n");
  }
}

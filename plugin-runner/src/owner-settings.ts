import { DomainError } from "@stavrobot/common";
import type { ApprovalStore } from "./approvals.js";
import type { Formats } from "./formats/index.js";
import type { NetworkPolicy } from "./network.js";
import type { Plugin } from "./formats/format.js";
import type { PluginStore } from "./plugins.js";

/**
 * What only the owner decides about a plugin beyond its permissions (the app sends these only
 * from the owner's settings, never from the model's tools): approving a plugin that asks for it,
 * and switching its network off or on.
 */
export class OwnerSettings {
  constructor(
    private readonly options: {
      plugins: PluginStore;
      formats: Formats;
      approvals: ApprovalStore;
      network: NetworkPolicy;
    },
  ) {}

  async approve(name: string, tool?: string): Promise<{ message: string; approved: string[] }> {
    const plugin = await this.existing(name);
    const approved = await this.options.approvals.approve(plugin, tool);
    const still = this.options.approvals.waiting(plugin);
    const message =
      approved.length === 0
        ? `Nothing of plugin "${name}" was waiting for approval${tool ? ` as tool "${tool}"` : ""}.`
        : `Approved version ${plugin.version} of plugin "${name}": ${approved.join(", ")}.` +
          (still.length > 0 ? ` Still waiting: ${still.join(", ")}.` : "");
    return { message, approved };
  }

  async setNetwork(name: string, on: boolean): Promise<{ message: string }> {
    const plugin = await this.existing(name);
    await this.options.network.set(plugin, on);
    // A kept process (Workbench) gets its new network when it starts again.
    await this.options.formats.stop(name);
    return { message: `Plugin "${name}" now runs ${on ? "with" : "without"} network.` };
  }

  private async existing(name: string): Promise<Plugin> {
    const plugin = await this.options.plugins.get(name);
    if (!plugin) throw new DomainError("not-found", `Plugin "${name}" not found.`);
    return plugin;
  }
}

/** What the owner's settings and the model see of a plugin besides its name and tools. */
export function pluginFacts(plugin: Plugin, approvals: ApprovalStore, network: NetworkPolicy) {
  const waiting = approvals.waiting(plugin);
  return {
    format: plugin.format,
    ...(plugin.version !== undefined ? { version: plugin.version } : {}),
    asks: plugin.declared,
    network: network.allows(plugin),
    networkAllowed: plugin.network,
    ...(plugin.needsApproval ? { waitingApproval: waiting } : {}),
    ...(plugin.server ? { server: plugin.server } : {}),
    ...(plugin.skills && plugin.skills.length > 0
      ? { skills: plugin.skills.map(({ name, description }) => ({ name, description })) }
      : {}),
    ...(plugin.verified !== undefined ? { verified: plugin.verified } : {}),
  };
}

import { ServiceError, pluginDetailSchema, type PluginDetail, type ServiceClient } from "@stavrobot/common";
import { ToolError } from "../tool-error.js";
import { toToolError } from "./plugin-runner-call.js";

const FRESH_MS = 30_000;

/**
 * Plugin details (tools and parameter types) as the plugin-runner last reported them. A run then
 * needs one request instead of two. `manage_plugins` forgets a plugin whenever it changes it, and
 * a detail is refetched after 30 s, or at once when a tool is not in it (an update added one).
 */
export class PluginDetailCache {
  private readonly entries = new Map<string, { detail: PluginDetail; at: number }>();

  constructor(
    private readonly pluginRunner: ServiceClient,
    private readonly now: () => number = Date.now,
  ) {}

  async get(plugin: string, signal?: AbortSignal, refresh = false): Promise<PluginDetail> {
    const cached = this.entries.get(plugin);
    if (cached && !refresh && this.now() - cached.at < FRESH_MS) return cached.detail;
    try {
      const { data } = await this.pluginRunner.request("GET", `/bundles/${plugin}`, {
        schema: pluginDetailSchema,
        signal,
      });
      this.entries.set(plugin, { detail: data, at: this.now() });
      return data;
    } catch (error) {
      this.entries.delete(plugin);
      if (error instanceof ServiceError && error.status === 404)
        throw new ToolError(`Plugin '${plugin}' not found.`);
      throw toToolError(error);
    }
  }

  forget(plugin?: string): void {
    if (plugin === undefined) this.entries.clear();
    else this.entries.delete(plugin);
  }
}

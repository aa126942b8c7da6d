import { ServiceError, bundleDetailSchema, type BundleDetail, type ServiceClient } from "@stavrobot/common";
import { ToolError } from "../tools/result.js";
import { toToolError } from "./runner-call.js";

const FRESH_MS = 30_000;

/**
 * Bundle details (tools and parameter types) as the plugin-runner last reported them. A run then
 * needs one request instead of two. `manage_plugins` forgets a plugin whenever it changes it, and
 * a detail is refetched after 30 s, or at once when a tool is not in it (an update added one).
 */
export class BundleDetailCache {
  private readonly entries = new Map<string, { detail: BundleDetail; at: number }>();

  constructor(
    private readonly runner: ServiceClient,
    private readonly now: () => number = Date.now,
  ) {}

  async get(plugin: string, signal?: AbortSignal, refresh = false): Promise<BundleDetail> {
    const cached = this.entries.get(plugin);
    if (cached && !refresh && this.now() - cached.at < FRESH_MS) return cached.detail;
    try {
      const { data } = await this.runner.request("GET", `/bundles/${plugin}`, {
        schema: bundleDetailSchema,
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

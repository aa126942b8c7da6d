import { DomainError, errorMessage, isToolPermitted } from "@stavrobot/common";
import type { Logger, ServiceClient } from "@stavrobot/common";
import type { RunProgress, ToolDef } from "./formats/format.js";
import type { BackgroundTasks } from "./background.js";
import type { PluginStore } from "./plugins.js";
import type { Executor } from "./executor.js";
import type { Formats } from "./formats/index.js";
import type { ApprovalStore } from "./approvals.js";
import type { NetworkPolicy } from "./network.js";
import type { RunOutcome } from "./chat-messages.js";
import { toolResultMessage } from "./chat-messages.js";
import type { Outbox } from "@stavrobot/common";
import type { PermissionStore } from "./permissions.js";
import type { RunningRecords } from "./running.js";
import { validateParams } from "./validate.js";
import { validateAgainstSchema } from "./formats/json-schema.js";

export interface ToolServiceDeps {
  plugins: PluginStore;
  formats: Formats;
  approvals: ApprovalStore;
  network: NetworkPolicy;
  executor: Executor;
  outbox: Outbox;
  running: RunningRecords;
  permissions: PermissionStore;
  background: BackgroundTasks;
  /** The app's internal API, told of a tool's progress for the turn it runs for. */
  app?: ServiceClient;
  logger: Logger;
}

export type RunAnswer = { kind: "done"; outcome: RunOutcome } | { kind: "started" };

/**
 * Finds a tool, checks that the owner permits it and that its parameters are right, and runs it:
 * inline for sync tools, in the background for async ones (recorded before the caller hears
 * "running", so a restart cannot lose it silently).
 */
export class ToolService {
  constructor(private readonly deps: ToolServiceDeps) {}

  /**
   * `turn`: the app's turn the run is for, whose sender may follow the tool's progress and which
   * an async run's result names, so the app hands it to that turn's agent.
   */
  async run(
    pluginName: string,
    toolName: string,
    input: Record<string, unknown>,
    turn?: number,
  ): Promise<RunAnswer> {
    const { plugins, formats, executor, background, outbox, running, permissions, logger } = this.deps;
    const plugin = await plugins.get(pluginName);
    // "Bundle" is the wire's word for a plugin; published clients match this text.
    if (!plugin) throw new DomainError("not-found", "Bundle not found");
    const tool = plugin.tools.find((candidate) => candidate.name === toolName);
    if (!tool) {
      throw new DomainError("not-found", `Tool not found. Available tools: ${describeTools(plugin.tools)}`);
    }
    const allowed = permissions.get(pluginName);
    if (allowed.length === 0)
      throw new DomainError("forbidden", "Plugin is disabled", { reason: "plugin-disabled" });
    if (!isToolPermitted(allowed, toolName)) {
      throw new DomainError("forbidden", "Tool not permitted", { reason: "tool-not-permitted" });
    }
    // Not an error of the request: the model is told why, and who can change it.
    if (tool.unavailable) return { kind: "done", outcome: { success: false, error: tool.unavailable } };
    if (tool.policy === "deny") {
      return {
        kind: "done",
        outcome: {
          success: false,
          error: `Tool "${toolName}" of plugin "${pluginName}" never runs: its permission policy is "deny".`,
        },
      };
    }
    const refusal = this.deps.approvals.refusal(plugin, toolName) ?? this.deps.network.refusal(plugin);
    if (refusal) return { kind: "done", outcome: { success: false, error: refusal } };
    const params = tool.schema
      ? await validateAgainstSchema(tool.schema, input)
      : validateParams(tool.parameters, input);
    const format = formats.get(plugin.format);
    if (!tool.async) {
      const told: Promise<void>[] = [];
      const outcome = await format.run(
        plugin,
        tool,
        params,
        executor.limits.syncTimeoutMs,
        turn === undefined
          ? undefined
          : (progress) => void told.push(this.tellProgress(turn, pluginName, toolName, progress)),
      );
      // The answer ends the turn's stream: the progress told before it must not arrive after it
      // (a server sends its last step just before its result).
      await Promise.all(told);
      return { kind: "done", outcome };
    }
    // The turn goes with the run (its record too): the result reports back to whoever started it.
    const id = await running.begin({ plugin: pluginName, tool: toolName, ...(turn ? { turn } : {}) });
    background.run(`${pluginName}/${toolName}`, async () => {
      let outcome: RunOutcome;
      try {
        outcome = await format.run(plugin, tool, params, executor.limits.asyncTimeoutMs);
      } catch (error) {
        logger.error("async tool run failed", {
          plugin: pluginName,
          tool: toolName,
          error: errorMessage(error),
        });
        outcome = { success: false, error: "The plugin runner could not run the tool (internal error)." };
      }
      await outbox.enqueue(toolResultMessage(pluginName, toolName, outcome, turn), { id });
      await running.end(id);
    });
    return { kind: "started" };
  }

  /**
   * Passes a tool's progress to the app for its turn, at once and only once (never retried, never
   * failing): only the run's answer waits for it to be delivered, for at most 5 s.
   */
  private async tellProgress(
    turn: number,
    plugin: string,
    tool: string,
    progress: RunProgress,
  ): Promise<void> {
    const { app, logger } = this.deps;
    if (!app) return;
    await app
      .request("POST", "/progress", {
        body: { turn, plugin, tool, ...progress },
        timeoutMs: 5_000,
        retries: 0,
      })
      .catch((error: unknown) => logger.debug("progress not passed on", { error: errorMessage(error) }));
  }
}

/** `a (x: string, y: file), b` for "Tool not found" messages (at most 20 tools named). */
export function describeTools(tools: readonly ToolDef[]): string {
  if (tools.length === 0) return "(none)";
  const shown = tools.slice(0, 20).map((tool) => {
    const params = Object.entries(tool.parameters).map(([key, spec]) => `${key}: ${spec.type}`);
    return params.length > 0 ? `${tool.name} (${params.join(", ")})` : tool.name;
  });
  if (tools.length > 20) shown.push(`and ${tools.length - 20} more`);
  return shown.join(", ");
}

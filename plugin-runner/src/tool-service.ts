import { HttpError, errorMessage } from "@stavrobot/common";
import type { Logger } from "@stavrobot/common";
import type { BackgroundTasks } from "./background.js";
import type { BundleStore } from "./bundles.js";
import { describeTools } from "./bundles.js";
import type { Executor } from "./executor.js";
import type { RunOutcome } from "./messages.js";
import { toolResultMessage } from "./messages.js";
import type { Outbox } from "./outbox.js";
import { validateParams } from "./validate.js";

export interface ToolServiceOptions {
  bundles: BundleStore;
  executor: Executor;
  outbox: Outbox;
  background: BackgroundTasks;
  logger: Logger;
}

export type RunAnswer = { kind: "done"; outcome: RunOutcome } | { kind: "started" };

/** Finds a tool, checks its parameters and runs it: inline for sync tools, in the background for async ones. */
export class ToolService {
  constructor(private readonly options: ToolServiceOptions) {}

  async run(pluginName: string, toolName: string, input: Record<string, unknown>): Promise<RunAnswer> {
    const { bundles, executor, background, outbox, logger } = this.options;
    const bundle = await bundles.get(pluginName);
    if (!bundle) throw new HttpError(404, "Bundle not found");
    const tool = bundle.tools.find((candidate) => candidate.name === toolName);
    if (!tool) throw new HttpError(404, `Tool not found. Available tools: ${describeTools(bundle.tools)}`);
    const params = validateParams(tool.parameters, input);
    if (!tool.async) {
      return {
        kind: "done",
        outcome: await executor.runTool(bundle, tool, params, executor.limits.syncTimeoutMs),
      };
    }
    background.run(`${pluginName}/${toolName}`, async () => {
      let outcome: RunOutcome;
      try {
        outcome = await executor.runTool(bundle, tool, params, executor.limits.asyncTimeoutMs);
      } catch (error) {
        logger.error("async tool run failed", {
          plugin: pluginName,
          tool: toolName,
          error: errorMessage(error),
        });
        outcome = { success: false, error: "The plugin runner could not run the tool (internal error)." };
      }
      await outbox.enqueue(toolResultMessage(pluginName, toolName, outcome));
    });
    return { kind: "started" };
  }
}

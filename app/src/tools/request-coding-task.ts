import { randomUUID } from "node:crypto";
import type { AgentTool } from "@mariozechner/pi-agent-core";
import { Type } from "@mariozechner/pi-ai";
import {
  PLUGIN_NAME_PATTERN,
  ServiceError,
  codeResponseSchema,
  errorBodyText,
  pluginDetailSchema,
} from "@stavrobot/common";
import type { PluginDetail, ServiceClient } from "@stavrobot/common";
import { visibleDetail } from "../plugins/visible.js";
import { ToolError, textResult } from "./result.js";

const parameters = Type.Object({
  plugin: Type.String({ description: "An editable plugin's name." }),
  message: Type.String({
    description:
      "The full specification: tools, parameters, return values, APIs to use and config keys (API keys) " +
      "needed. The agent cannot ask questions.",
  }),
});

export interface RequestCodingTaskDeps {
  coder: ServiceClient;
  pluginRunner: ServiceClient;
}

/**
 * `request_coding_task`: hands a plugin to the coder service, whose coding agent writes or changes
 * its tools in the background. Only plugins the model can see (not disabled by the owner) and that
 * are editable (created locally, not installed from git) qualify; the result arrives later as a
 * message from source "coder".
 */
export function createRequestCodingTaskTool(deps: RequestCodingTaskDeps): AgentTool<typeof parameters> {
  return {
    name: "request_coding_task",
    label: "Request coding task",
    description:
      "Have the coding agent write or change the tools of an editable plugin (made with manage_plugins " +
      "create). It works in the background; its report arrives later from the coder.",
    parameters,
    async execute(_id, params, signal) {
      const plugin = params.plugin.trim();
      const message = params.message.trim();
      if (!message) throw new ToolError("'message' must describe the coding task.");
      if (!PLUGIN_NAME_PATTERN.test(plugin)) throw new ToolError(`Plugin '${plugin}' not found.`);
      const detail = await findPlugin(deps.pluginRunner, plugin, signal);
      if (!detail.editable) {
        throw new ToolError(
          `Plugin '${plugin}' was installed from git, so it cannot be edited. Create an editable plugin with ` +
            "manage_plugins create and have the coder write that one.",
        );
      }
      const taskId = randomUUID();
      try {
        await deps.coder.request("POST", "/code", {
          body: { taskId, plugin, message },
          schema: codeResponseSchema,
          signal,
        });
      } catch (error) {
        throw coderError(error);
      }
      return textResult(
        `Coding task ${taskId} submitted for plugin '${plugin}'. The result will arrive as a message when it is done.`,
        { taskId },
      );
    },
  };
}

/** The plugin as the model may see it; a missing or disabled plugin is "not found". */
async function findPlugin(
  pluginRunner: ServiceClient,
  plugin: string,
  signal?: AbortSignal,
): Promise<PluginDetail> {
  let detail: PluginDetail;
  try {
    ({ data: detail } = await pluginRunner.request("GET", `/bundles/${plugin}`, {
      schema: pluginDetailSchema,
      retries: 1,
      signal,
    }));
  } catch (error) {
    if (error instanceof ServiceError && error.status === 404)
      throw new ToolError(`Plugin '${plugin}' not found.`);
    if (error instanceof ServiceError && error.status === undefined) {
      throw new ToolError(`The plugin runner is unreachable: ${error.message}`);
    }
    throw error;
  }
  const visible = visibleDetail(detail);
  if (!visible) throw new ToolError(`Plugin '${plugin}' not found.`);
  return visible;
}

function coderError(error: unknown): Error {
  if (!(error instanceof ServiceError)) return error instanceof Error ? error : new Error(String(error));
  if (error.status === undefined) {
    return new ToolError(
      "The coder service is not running, so coding tasks cannot be done right now. The owner can enable it " +
        'by adding a [coder] section to config.toml (e.g. model = "sonnet"), giving it a Claude login or an ' +
        "API key, and starting it (with Docker: the coder service in docker-compose.yml).",
    );
  }
  return new ToolError(`The coder refused the task: ${errorBodyText(error.body) ?? error.message}`);
}

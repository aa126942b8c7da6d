import { lstat, readFile, realpath } from "node:fs/promises";
import { basename, isAbsolute, relative, resolve } from "node:path";
import type { AgentTool, AgentToolResult } from "@mariozechner/pi-agent-core";
import { Type, type ImageContent } from "@mariozechner/pi-ai";
import {
  TURN_HEADER,
  PLUGIN_FILES_LIMIT_BYTES,
  PLUGIN_NAME_PATTERN,
  ServiceError,
  errorBodyText,
  runToolResponseSchema,
} from "@stavrobot/common";
import type { Attachment, ServiceClient, ToolSummary, TransportedFile } from "@stavrobot/common";
import { PluginDetailCache } from "../plugins/detail-cache.js";
import { describePluginRun } from "../plugins/result.js";
import { visibleDetail } from "../plugins/visible.js";
import { ToolError, textResult } from "./result.js";

const parameters = Type.Object({
  plugin: Type.String({ description: "Plugin name." }),
  tool: Type.String({ description: "Tool name within the plugin (see manage_plugins show)." }),
  parameters: Type.Optional(
    Type.String({
      description: 'The tool\'s parameters as a JSON object string, e.g. {"city": "Oslo"}.',
    }),
  ),
});

/** Sync tools may take 30 s on the runner; leave room for the transfer on top. */
const RUN_TIMEOUT_MS = 90_000;
const MAX_INPUT_FILE_BYTES = PLUGIN_FILES_LIMIT_BYTES;

export function createRunPluginTool(deps: {
  pluginRunner: ServiceClient;
  filesDir: string;
  /** Shared with manage_plugins, which forgets a plugin whenever it changes it. */
  details?: PluginDetailCache;
  /** The turn running (its inbox id): the runner passes the tool's progress on for it. */
  currentInboxId?: () => number | undefined;
}): AgentTool<typeof parameters> {
  const { pluginRunner } = deps;
  const details = deps.details ?? new PluginDetailCache(pluginRunner);
  return {
    name: "run_plugin_tool",
    label: "Run plugin tool",
    description:
      "Run a tool of an installed plugin. Find plugins with manage_plugins list and a tool's parameters with " +
      `manage_plugins show. File parameters take paths under ${deps.filesDir}; files the tool returns are saved there too.`,
    parameters,
    async execute(_id, params, signal) {
      const plugin = params.plugin.trim();
      if (!PLUGIN_NAME_PATTERN.test(plugin)) throw new ToolError(`Plugin '${plugin}' not found.`);
      let detail = visibleDetail(await details.get(plugin, signal));
      if (!detail?.tools.some((candidate) => candidate.name === params.tool)) {
        // Changed since it was cached (updated, re-permitted)? Ask once more before saying no.
        detail = visibleDetail(await details.get(plugin, signal, true));
      }
      if (!detail) throw new ToolError(`Plugin '${plugin}' not found.`);
      const tool = detail.tools.find((candidate) => candidate.name === params.tool);
      if (!tool) {
        const available = detail.tools.map((candidate) => candidate.name).join(", ") || "(none)";
        throw new ToolError(
          `Tool '${params.tool}' not found on plugin '${plugin}'. Available tools: ${available}`,
        );
      }
      const input = await prepareInput(parseParameters(params.parameters), tool, deps.filesDir);
      let answer;
      try {
        answer = await pluginRunner.request(
          "POST",
          `/bundles/${plugin}/tools/${encodeURIComponent(tool.name)}/run`,
          {
            body: input,
            schema: runToolResponseSchema,
            // An MCP server's call may also wait for the owner's answers to its questions.
            timeoutMs: Math.max(RUN_TIMEOUT_MS, ((detail.runSeconds ?? 0) + 10) * 1000),
            signal,
            headers: turnHeader(deps.currentInboxId?.()),
          },
        );
      } catch (error) {
        if (error instanceof ServiceError) {
          // The owner changed the permissions since this detail was read.
          if (error.status === 403) {
            details.forget(plugin);
            throw new ToolError(
              errorReason(error.body) === "plugin-disabled"
                ? `Plugin '${plugin}' not found.`
                : `Tool '${tool.name}' not found on plugin '${plugin}'.`,
            );
          }
          const text = errorBodyText(error.body);
          if (text) throw new ToolError(text);
          if (error.status === undefined)
            throw new ToolError(`The plugin runner is unreachable: ${error.message}`);
        }
        throw error;
      }
      const data = answer.data;
      if ("status" in data) {
        return textResult(
          `Tool "${tool.name}" (plugin "${plugin}") is running asynchronously. The result will arrive when it completes.`,
        );
      }
      const run = await describePluginRun({
        plugin,
        tool: tool.name,
        outcome: data,
        filesDir: deps.filesDir,
      });
      if (!run.ok) throw new ToolError(run.text);
      return withImages(textResult(run.text), run.files);
    },
  };
}

/** Images the model can look at: the common web formats, each at most this large. */
const SEEN_IMAGE_TYPES = new Set(["image/png", "image/jpeg", "image/gif", "image/webp"]);
const SEEN_IMAGE_LIMIT_BYTES = 5 * 1024 * 1024;

/**
 * The result with the images among the returned files attached, so the model sees them (an MCP
 * server's image content, a chart a plugin drew); they stay saved and listed like every file.
 */
async function withImages(
  result: AgentToolResult<unknown>,
  files: Attachment[],
): Promise<AgentToolResult<unknown>> {
  const images: ImageContent[] = [];
  for (const file of files) {
    if (!SEEN_IMAGE_TYPES.has(file.mimeType) || file.size > SEEN_IMAGE_LIMIT_BYTES) continue;
    images.push({
      type: "image",
      mimeType: file.mimeType,
      data: (await readFile(file.storedPath)).toString("base64"),
    });
  }
  return images.length > 0 ? { ...result, content: [...result.content, ...images] } : result;
}

function parseParameters(text: string | undefined): Record<string, unknown> {
  if (text === undefined || text.trim() === "") return {};
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (error) {
    throw new ToolError(`'parameters' is not valid JSON: ${(error as Error).message}`);
  }
  if (!value || typeof value !== "object" || Array.isArray(value)) {
    throw new ToolError("'parameters' must be a JSON object.");
  }
  return value as Record<string, unknown>;
}

/** Replaces `file` parameters (paths inside filesDir) with `{filename, data}` for the runner. */
async function prepareInput(
  input: Record<string, unknown>,
  tool: ToolSummary,
  filesDir: string,
): Promise<Record<string, unknown>> {
  const prepared: Record<string, unknown> = { ...input };
  for (const [key, spec] of Object.entries(tool.parameters)) {
    if (spec.type !== "file" || input[key] === undefined) continue;
    const value = input[key];
    if (typeof value !== "string")
      throw new ToolError(`Parameter "${key}" must be a file path in ${filesDir}.`);
    prepared[key] = await readInputFile(key, value, filesDir);
  }
  return prepared;
}

async function readInputFile(key: string, path: string, filesDir: string): Promise<TransportedFile> {
  const outside = () => new ToolError(`Parameter "${key}": the file must be inside ${filesDir}.`);
  let real: string;
  let root: string;
  try {
    root = await realpath(filesDir);
    real = await realpath(resolve(filesDir, path));
  } catch {
    throw new ToolError(`Parameter "${key}": file not found: ${path}`);
  }
  const rel = relative(root, real);
  if (rel === "" || rel.startsWith("..") || isAbsolute(rel)) throw outside();
  const info = await lstat(real);
  if (!info.isFile()) throw new ToolError(`Parameter "${key}": ${path} is not a regular file.`);
  if (info.size > MAX_INPUT_FILE_BYTES)
    throw new ToolError(`Parameter "${key}": ${path} is larger than 25 MB.`);
  return { filename: basename(real), data: (await readFile(real)).toString("base64") };
}

/** The runner's reason for a refusal (`{error, kind, reason}`), matched instead of its words. */
function errorReason(body: unknown): string | undefined {
  const reason = (body as { reason?: unknown } | undefined)?.reason;
  return typeof reason === "string" ? reason : undefined;
}

function turnHeader(inboxId: number | undefined): Record<string, string> {
  return inboxId === undefined ? {} : { [TURN_HEADER]: String(inboxId) };
}

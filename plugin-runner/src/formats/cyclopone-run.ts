import { sanitizeText } from "@stavrobot/common";
import type { ProcessResult } from "@stavrobot/common";
import type { Executor } from "../executor.js";
import type { RunOutcome } from "../chat-messages.js";
import type { Plugin, ToolDef } from "./format.js";
import type { ValidatedParams } from "../validate.js";

/** The start of stderr a failed run's error carries (as Cyclop One's host does). */
const STDERR_SHOWN = 500;

/**
 * One call of a Cyclop One tool, as its guide and its host define it: the entrypoint runs with cwd
 * = the plugin directory, `{tool, input, context: {plugin_dir, data_dir}}` on stdin (then closed),
 * `CYCLOPONE_PLUGIN_DIR` and `CYCLOPONE_DATA_DIR` in its environment (paths as the plugin sees
 * them), 30 s, 1 MB of stdout and 64 KB of stderr. The answer is `{result, is_error}`; stdout that
 * is not a JSON object is the text result; empty stdout and a non-zero exit are errors.
 */
export async function runCyclopOneTool(
  executor: Executor,
  plugin: Plugin,
  tool: ToolDef,
  params: ValidatedParams,
  timeoutMs: number,
): Promise<RunOutcome> {
  const prepared = await executor.prepareForRun(plugin.dir, plugin.name);
  const paths = executor.pluginPaths(plugin, prepared, undefined);
  const request = {
    tool: tool.name,
    input: params.values,
    context: { plugin_dir: paths.pluginRoot, data_dir: paths.dataRoot },
  };
  const result = await executor.spawn(plugin.name, prepared, paths, {
    command: paths.toSandbox(tool.entrypoint),
    cwd: paths.pluginRoot,
    stdin: JSON.stringify(request),
    timeoutMs,
    env: { CYCLOPONE_PLUGIN_DIR: paths.pluginRoot, CYCLOPONE_DATA_DIR: paths.dataRoot },
    failure: cyclopOneFailure,
  });
  if (result.ok) return cyclopOneAnswer(result.process, executor.limits.stdoutLimitBytes);
  return result.outcome;
}

/**
 * What a finished run answered. A process that exited non-zero never gets here (the executor
 * reports it); this reads a zero exit's stdout.
 */
export function cyclopOneAnswer(result: ProcessResult, stdoutLimitBytes: number): RunOutcome {
  if (result.stdoutTruncated) {
    const mb = Math.round((stdoutLimitBytes / 1024 / 1024) * 10) / 10;
    return { success: false, error: `Plugin output exceeded ${mb} MB` };
  }
  const stdout = sanitizeText(result.stdout).trim();
  if (stdout.length === 0) return { success: false, error: "Plugin returned no output" };
  let parsed: unknown;
  try {
    parsed = JSON.parse(stdout);
  } catch {
    return { success: true, output: stdout };
  }
  if (!parsed || typeof parsed !== "object" || Array.isArray(parsed))
    return { success: true, output: stdout };
  const answer = parsed as Record<string, unknown>;
  const text =
    answer.result === undefined
      ? "(no result field)"
      : typeof answer.result === "string"
        ? answer.result
        : JSON.stringify(answer.result);
  return answer.is_error === true ? { success: false, error: text } : { success: true, output: text };
}

/** Cyclop One's wording for a run that failed: the exit code and the start of stderr (stdout dropped). */
export function cyclopOneFailure(result: ProcessResult): string {
  const how = result.signal ? `signal ${result.signal}` : `exit ${result.exitCode}`;
  const stderr = sanitizeText(result.stderr).trim().slice(0, STDERR_SHOWN);
  return `Plugin process failed (${how})${stderr ? `: ${stderr}` : ""}`;
}

import { lchown, lstat, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { collectOutputFiles, resolveInside, sanitizeDeep, sanitizeText } from "@stavrobot/common";
import type { ProcessResult, TransportedFile } from "@stavrobot/common";
import type { Executor } from "../executor.js";
import type { Limits } from "../limits.js";
import type { RunOutcome } from "../chat-messages.js";
import type { Plugin, ToolDef } from "./format.js";
import type { ValidatedParams } from "../validate.js";

const MAX_OUTPUT_FILES = 100;
const INIT_OUTPUT_CHARS = 8_000;

/** Runs a Stavrobot plugin's init script (cwd = plugin root); stdout becomes the init output. */
export async function runStavrobotInit(
  executor: Executor,
  plugin: Plugin,
  timeoutMs: number,
): Promise<RunOutcome> {
  if (!plugin.init) return { success: true, output: "" };
  const prepared = await executor.preparePlugin(plugin.dir, plugin.name);
  let entrypoint: string;
  try {
    entrypoint = await resolveInside(plugin.dir, plugin.init.entrypoint);
  } catch (error) {
    return { success: false, error: `Invalid init entrypoint: ${(error as Error).message}` };
  }
  return executor.withWorkDir(plugin.name, prepared.owner, async (work) => {
    const paths = executor.pluginPaths(plugin, prepared, work.host);
    const result = await executor.spawn(plugin.name, prepared, paths, {
      command: paths.toSandbox(entrypoint),
      cwd: paths.toSandbox(plugin.dir),
      stdin: "",
      timeoutMs,
    });
    if (!result.ok) return result.outcome;
    let output = result.process.stdout.trim();
    if (output.length > INIT_OUTPUT_CHARS)
      output = "…(earlier output omitted)\n" + output.slice(-INIT_OUTPUT_CHARS);
    return { success: true, output: sanitizeText(output) };
  });
}

/**
 * Runs a Stavrobot tool with the reference's contract:
 * - stdin is exactly the parameters the model passed, `file` parameters replaced by paths in
 *   `/tmp/<plugin>/`, where the input files are written;
 * - the output files are the top-level regular files the tool writes (or changes) there;
 * - the directory is empty before and after every run;
 * - stdout is parsed as JSON, else returned as text.
 */
export async function runStavrobotTool(
  executor: Executor,
  plugin: Plugin,
  tool: ToolDef,
  params: ValidatedParams,
  timeoutMs: number,
): Promise<RunOutcome> {
  const prepared = await executor.prepareForRun(plugin.dir, plugin.name);
  return executor.withWorkDir(plugin.name, prepared.owner, async (work) => {
    const stdin: Record<string, unknown> = { ...params.values };
    const inputs = new Map<string, { size: number; mtimeMs: number }>();
    for (const file of params.files) {
      let name = file.filename;
      for (let n = 2; inputs.has(name); n++) name = `${n}-${file.filename}`;
      const path = join(work.host, name);
      await writeFile(path, file.data, { mode: 0o600, flag: "wx" });
      if (prepared.owner) await lchown(path, prepared.owner.uid, prepared.owner.gid);
      const info = await lstat(path);
      inputs.set(name, { size: info.size, mtimeMs: info.mtimeMs });
      stdin[file.param] = `${work.visible}/${name}`;
    }
    const paths = executor.pluginPaths(plugin, prepared, work.host);
    const result = await executor.spawn(plugin.name, prepared, paths, {
      command: paths.toSandbox(tool.entrypoint),
      cwd: paths.toSandbox(tool.dir),
      stdin: JSON.stringify(stdin),
      timeoutMs,
    });
    if (!result.ok) return result.outcome;
    // The top-level regular files the run wrote or changed (an input left as it was is not output).
    const collected = await collectOutputFiles(work.host, {
      maxFiles: MAX_OUTPUT_FILES,
      maxBytes: executor.limits.outputFilesBytes,
      ...(prepared.owner ? { owner: prepared.owner } : {}),
      skip: async (name) => {
        const input = inputs.get(name);
        if (!input) return false;
        const now = await lstat(join(work.host, name)).catch(() => undefined);
        return now !== undefined && now.size === input.size && now.mtimeMs === input.mtimeMs;
      },
    });
    return toolSuccess(result.process, executor.limits, collected);
  });
}

function toolSuccess(
  result: ProcessResult,
  limits: Limits,
  collected: { files: TransportedFile[]; notes: string[] },
): RunOutcome {
  const warnings = [...collected.notes];
  const stdout = sanitizeText(result.stdout);
  let output: unknown;
  if (result.stdoutTruncated) {
    const limitMb = Math.round((limits.stdoutLimitBytes / 1024 / 1024) * 10) / 10;
    output = `${stdout}\n[output truncated: the tool printed more than ${limitMb} MB]`;
    warnings.unshift(`Output truncated: the tool printed more than ${limitMb} MB to stdout.`);
  } else {
    try {
      // JSON may spell out what the text could not hold ("\u0000").
      output = sanitizeDeep(JSON.parse(stdout));
    } catch {
      output = stdout;
    }
  }
  return {
    success: true,
    output,
    ...(collected.files.length > 0 ? { files: collected.files } : {}),
    ...(warnings.length > 0 ? { warnings } : {}),
  };
}

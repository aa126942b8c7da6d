import { constants } from "node:os";
import { sanitizeText } from "@stavrobot/common";
import type { ProcessResult } from "@stavrobot/common";

/**
 * The script as uv reads it: a PEP 723 `# /// script` header naming the dependencies, then the
 * code. The requirements were validated at the contract (no quotes or line breaks), so each fits
 * in a TOML string as it is. Without dependencies the code is left untouched.
 */
export function buildScript(code: string, dependencies: readonly string[]): string {
  if (dependencies.length === 0) return code;
  const list = dependencies.map((dependency) => `"${dependency}"`).join(", ");
  return `# /// script\n# dependencies = [${list}]\n# ///\n${code}`;
}

/**
 * The run's output text as the reference builds it, each part on its own line: stdout; `stderr:`
 * and stderr when there was any; then `Process timed out after N seconds.`, `Exit code: N.`, or
 * `Script produced no output.` when there was nothing at all. Notes (truncation, files left out)
 * follow. Made storable (no U+0000, no lone surrogates) so the app can save it. A spawn failure
 * names programs without their directories (see `withoutDirectories`).
 */
export function formatOutput(
  result: ProcessResult,
  limits: { timeoutMs: number; stdoutLimitBytes: number; stderrLimitBytes: number },
  notes: readonly string[] = [],
): string {
  const parts: string[] = [];
  if (result.spawnError) parts.push(`Failed to spawn process: ${withoutDirectories(result.spawnError)}`);
  if (result.stdout) parts.push(result.stdout);
  if (result.stdoutTruncated) parts.push(`[stdout truncated after ${size(limits.stdoutLimitBytes)}]`);
  if (result.stderr) parts.push(`stderr:\n${result.stderr}`);
  if (result.stderrTruncated) parts.push(`[stderr truncated after ${size(limits.stderrLimitBytes)}]`);
  if (result.timedOut) parts.push(`Process timed out after ${seconds(limits.timeoutMs)}.`);
  else if (result.signal)
    parts.push(`Exit code: ${-signalNumber(result.signal)} (killed by ${result.signal}).`);
  else if (result.exitCode !== null && result.exitCode !== 0) parts.push(`Exit code: ${result.exitCode}.`);
  if (parts.length === 0) parts.push("Script produced no output.");
  return sanitizeText([...parts, ...notes].join("\n"));
}

/**
 * The text with every absolute path cut to its last component: a spawn failure names the program
 * by its path (`spawn /srv/state/runs/1f0c…/uv ENOENT`), and the model needs the program and the
 * reason, not where this machine keeps its run and temporary directories (as the plugin-runner's
 * error texts leave out its run and cache directories).
 */
export function withoutDirectories(text: string): string {
  return text.replace(/(^|[\s'"(=:])\/(?:[^\s'"/]+\/)*(?=[^\s'"/])/g, "$1");
}

function size(bytes: number): string {
  return bytes >= 1024 * 1024
    ? `${Math.round(bytes / 1024 / 102.4) / 10} MB`
    : `${Math.round(bytes / 1024)} KB`;
}

function seconds(ms: number): string {
  const value = Math.round(ms / 100) / 10;
  return `${value} second${value === 1 ? "" : "s"}`;
}

function signalNumber(signal: NodeJS.Signals): number {
  return constants.signals[signal] ?? 0;
}

import { accessSync, constants, realpathSync, statSync } from "node:fs";
import { dirname, resolve } from "node:path";
import { SYSTEM_TOOL_PATH, runtimeMounts, which } from "@stavrobot/common";
import type { Mount, ProcessResult, Sandbox } from "@stavrobot/common";
import type { CoderConfig } from "./config.js";
import type { PluginTarget } from "./plugin.js";
import type { StagedPrompts } from "./prompts.js";

/** What a task produced: the agent's answer, or why there is none. */
export type TaskOutcome = { ok: true; text: string } | { ok: false; reason: string };

export interface ClaudeCliDeps {
  sandbox: Sandbox;
  prompts: StagedPrompts;
  config: Pick<CoderConfig, "claudePath" | "searchPath" | "home" | "model" | "timeoutMs" | "auth">;
}

/** Programs the agent may need besides the CLI (node runs it; uv, python3 and git test plugins). */
const RUNTIMES = ["node", "uv", "python3", "git"];
const STDOUT_LIMIT = 4 * 1024 * 1024;
const STDERR_LIMIT = 64 * 1024;
const TAIL_CHARS = 2_000;

/**
 * Runs Claude Code headless for one task, through the shared sandbox, as the plugin's user:
 * `claude -p --output-format json --dangerously-skip-permissions --append-system-prompt-file …
 * --no-session-persistence --model …`, with the task's message on stdin (so no message can be read
 * as an option, and none is too long for one argument). The working directory and HOME are the
 * plugin directory (`/plugins/<name>` with namespaces), so the CLI keeps its state, and finds the
 * lent login, in the plugin's `.claude/`. Nothing else of the data directory is visible; the
 * network is on, since the agent must reach the model's API.
 */
export class ClaudeCli {
  constructor(private readonly deps: ClaudeCliDeps) {}

  /** The CLI's absolute path, or undefined when it is not installed (looked up for every task). */
  locate(): string | undefined {
    const { claudePath, searchPath } = this.deps.config;
    if (!claudePath.includes("/")) return which(claudePath, searchPath);
    const path = resolve(claudePath);
    try {
      accessSync(path, constants.X_OK);
      return statSync(path).isFile() ? path : undefined;
    } catch {
      return undefined;
    }
  }

  async run(target: PluginTarget, message: string): Promise<TaskOutcome> {
    const { sandbox, prompts, config } = this.deps;
    const cli = this.locate();
    if (!cli) {
      return {
        ok: false,
        reason:
          `the Claude Code CLI was not found (CLAUDE_PATH=${config.claudePath}). Install it in the coder's ` +
          "environment (npm install -g @anthropic-ai/claude-code) or point CLAUDE_PATH at it",
      };
    }
    const namespaces = sandbox.mode === "namespaces";
    const root = namespaces ? `/plugins/${target.name}` : target.dir;
    const toolDirs = this.toolDirs(cli);
    const mounts: Mount[] = namespaces
      ? [
          ...runtimeMounts(toolDirs.join(":"), config.home),
          { source: target.dir, target: root, writable: true },
          { source: prompts.systemPrompt, target: prompts.visible.systemPrompt },
          { source: prompts.guide, target: prompts.visible.guide },
        ]
      : [];
    const result = await sandbox.run({
      command: cli,
      args: [
        "-p",
        "--output-format",
        "json",
        "--dangerously-skip-permissions",
        "--append-system-prompt-file",
        namespaces ? prompts.visible.systemPrompt : prompts.systemPrompt,
        "--no-session-persistence",
        "--model",
        config.model,
      ],
      cwd: root,
      env: this.env(root, [...toolDirs, SYSTEM_TOOL_PATH].join(":")),
      stdin: message,
      timeoutMs: config.timeoutMs,
      stdoutLimitBytes: STDOUT_LIMIT,
      stderrLimitBytes: STDERR_LIMIT,
      killGraceMs: 5_000,
      mounts,
      network: true,
      // No address-space limit: Node reserves far more virtual memory than it uses.
      limits: { processes: 512, fileSizeBytes: 512 * 1024 * 1024, openFiles: 8_192 },
      ...(target.owner ? { user: target.owner } : {}),
    });
    return readOutcome(result, config.timeoutMs);
  }

  /** The CLI's directory (and its real one, for a symlinked launcher), then the runtimes' ones. */
  private toolDirs(cli: string): string[] {
    const dirs = [dirname(cli)];
    try {
      dirs.push(dirname(realpathSync(cli)));
    } catch {
      // Not resolvable: the launcher's own directory is all there is.
    }
    for (const program of RUNTIMES) {
      const found = which(program, this.deps.config.searchPath);
      if (found) dirs.push(dirname(found));
    }
    return [...new Set(dirs)];
  }

  private env(home: string, path: string): Record<string, string> {
    const { auth } = this.deps.config;
    const env: Record<string, string> = {
      PATH: path,
      HOME: home,
      LANG: "C.UTF-8",
      // The install is read-only and shared; telemetry and update checks are not the agent's job.
      DISABLE_AUTOUPDATER: "1",
      CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: "1",
    };
    if (auth.kind === "api-key") {
      env.ANTHROPIC_API_KEY = auth.apiKey;
      if (auth.baseUrl) env.ANTHROPIC_BASE_URL = auth.baseUrl;
    }
    return env;
  }
}

/** The CLI's JSON result (`{"type":"result","subtype":"success","is_error":false,"result":…}`). */
interface ResultJson {
  type?: unknown;
  subtype?: unknown;
  is_error?: unknown;
  result?: unknown;
  errors?: unknown;
}

/**
 * Success only for a clean exit with a `success` result that is not flagged as an error (the CLI
 * reports an API failure as `subtype: "success", is_error: true`). Anything else becomes a reason
 * the assistant can act on, with the tail of stderr.
 */
export function readOutcome(result: ProcessResult, timeoutMs: number): TaskOutcome {
  const stderr = tail(result.stderr);
  const fail = (reason: string): TaskOutcome => ({
    ok: false,
    reason: stderr ? `${reason}\nstderr (end):\n${stderr}` : reason,
  });
  if (result.spawnError) return fail(`the Claude Code CLI could not be started: ${result.spawnError}`);
  if (result.timedOut) {
    return fail(
      `the coding agent did not finish within ${duration(timeoutMs)} and was stopped; the plugin may be partly changed`,
    );
  }
  const json = parseResultJson(result.stdout);
  if (!json) {
    const how = result.signal
      ? `was killed by ${result.signal}`
      : result.exitCode !== 0
        ? `exited with code ${result.exitCode}`
        : "ended";
    const out = tail(result.stdout);
    return fail(`the Claude Code CLI ${how} without a JSON result${out ? `; it printed:\n${out}` : ""}`);
  }
  if (json.subtype === "success" && json.is_error !== true && typeof json.result === "string") {
    if (result.exitCode === 0) return { ok: true, text: json.result };
  }
  return fail(describeError(json, result));
}

function describeError(json: ResultJson, result: ProcessResult): string {
  const known: Record<string, string> = {
    error_max_turns: "the agent stopped after reaching its maximum number of turns",
    error_during_execution: "the agent failed while working",
    error_max_budget_usd: "the agent reached its spending limit",
  };
  const subtype = typeof json.subtype === "string" ? json.subtype : "unknown";
  let reason =
    known[subtype] ??
    (subtype === "success" ? "the model's API answered with an error" : `the agent ended with "${subtype}"`);
  const details = [
    ...(Array.isArray(json.errors) ? json.errors.filter((e): e is string => typeof e === "string") : []),
    ...(typeof json.result === "string" && json.result.trim() ? [json.result.trim()] : []),
  ];
  if (details.length > 0) reason += `: ${tail(details.join("\n"))}`;
  if (result.exitCode !== 0) reason += ` (exit code ${result.exitCode ?? result.signal})`;
  return reason;
}

/** The whole stdout as JSON, or else its last line that is a JSON object with a subtype. */
function parseResultJson(stdout: string): ResultJson | undefined {
  const candidates = [stdout.trim(), ...stdout.trim().split("\n").reverse()];
  for (const text of candidates) {
    if (!text.startsWith("{")) continue;
    try {
      const value = JSON.parse(text) as unknown;
      if (value && typeof value === "object" && !Array.isArray(value) && "subtype" in value) {
        return value as ResultJson;
      }
    } catch {
      // Not JSON: try the next candidate.
    }
  }
  return undefined;
}

function tail(text: string): string {
  const trimmed = text.trim();
  return trimmed.length <= TAIL_CHARS ? trimmed : `…${trimmed.slice(-TAIL_CHARS)}`;
}

function duration(ms: number): string {
  return ms >= 60_000 && ms % 60_000 === 0 ? `${ms / 60_000} min` : `${Math.round(ms / 100) / 10} s`;
}

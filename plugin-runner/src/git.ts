import { badRequest } from "@stavrobot/common";
import type { Owner } from "./fs-safe.js";
import { runProcess } from "./process.js";

const ALLOWED_PREFIXES = ["https://", "http://", "git://", "ssh://", "git@"];

/**
 * Accepts only network URLs git fetches without running anything locally: refuses `file://`,
 * `ext::…` remote helpers, option-looking values such as `--upload-pack=…`, and whitespace.
 * GIT_ALLOW_PROTOCOL enforces the same list inside git (redirects, submodules).
 */
export function checkGitUrl(url: string): void {
  const allowed = ALLOWED_PREFIXES.some((prefix) => url.startsWith(prefix));
  // eslint-disable-next-line no-control-regex
  if (!allowed || /[\s\x00-\x1f\x7f]/.test(url)) {
    throw badRequest(`Unsupported repository URL. Use a URL starting with ${ALLOWED_PREFIXES.join(", ")}.`);
  }
}

export interface GitOptions {
  timeoutMs: number;
  /** Base environment (PATH, HOME, certificates); git-specific variables are added here. */
  env: Record<string, string>;
}

function gitEnv(base: Record<string, string>): Record<string, string> {
  return {
    ...base,
    GIT_TERMINAL_PROMPT: "0",
    GIT_ALLOW_PROTOCOL: "https:http:git:ssh",
    GIT_SSH_COMMAND: "ssh -o BatchMode=yes",
    LC_ALL: "C",
  };
}

async function git(args: string[], cwd: string, options: GitOptions, owner?: Owner): Promise<string> {
  const result = await runProcess({
    command: "git",
    args,
    cwd,
    env: gitEnv(options.env),
    timeoutMs: options.timeoutMs,
    uid: owner?.uid,
    gid: owner?.gid,
    stdoutLimitBytes: 1024 * 1024,
    stderrLimitBytes: 64 * 1024,
  });
  if (result.spawnError) throw new Error(`git could not be started: ${result.spawnError}`);
  if (result.timedOut)
    throw new Error(`git ${args[0]} timed out after ${Math.round(options.timeoutMs / 1000)} s`);
  if (result.exitCode !== 0) {
    const detail = result.stderr.trim().split("\n").slice(-5).join("\n") || `exit code ${result.exitCode}`;
    throw new Error(detail);
  }
  return result.stdout;
}

/** `git clone --depth 1 -- <url> <dest>`; `dest` must be an empty directory. */
export async function gitClone(url: string, dest: string, options: GitOptions): Promise<void> {
  checkGitUrl(url);
  await git(["clone", "--depth", "1", "--", url, dest], dest, options);
}

/**
 * Fetches the remote's default branch. Runs as the plugin's own user: the repository (and its
 * .git/config, which can name programs for git to run) belongs to the plugin, so git must never
 * act on it as root.
 */
export async function gitFetch(dir: string, options: GitOptions, owner?: Owner): Promise<void> {
  await git(["-C", dir, "fetch", "--depth", "1", "origin"], dir, options, owner);
}

/** A file's content at FETCH_HEAD, or undefined when it does not exist there. */
export async function gitShowFetched(dir: string, path: string, options: GitOptions, owner?: Owner) {
  try {
    return await git(["-C", dir, "show", `FETCH_HEAD:${path}`], dir, options, owner);
  } catch {
    return undefined;
  }
}

export async function gitResetToFetched(dir: string, options: GitOptions, owner?: Owner): Promise<void> {
  await git(["-C", dir, "reset", "--hard", "FETCH_HEAD"], dir, options, owner);
}

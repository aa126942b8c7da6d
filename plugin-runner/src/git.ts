import { DomainError, runProcess } from "@stavrobot/common";
import type { ProcessResult } from "@stavrobot/common";

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
    throw new DomainError(
      "invalid",
      `Unsupported repository URL. Use a URL starting with ${ALLOWED_PREFIXES.join(", ")}.`,
    );
  }
}

/** Settings every git invocation gets: no prompts, network protocols only, plain messages. */
export const GIT_ENV: Readonly<Record<string, string>> = {
  GIT_TERMINAL_PROMPT: "0",
  GIT_ALLOW_PROTOCOL: "https:http:git:ssh",
  GIT_SSH_COMMAND: "ssh -o BatchMode=yes",
  LC_ALL: "C",
};

/** Runs `git <args>` somewhere: as the runner for a clone, in the plugin's sandbox for an update. */
export type GitRun = (args: string[]) => Promise<ProcessResult>;

async function git(run: GitRun, args: string[], timeoutMs: number): Promise<string> {
  const result = await run(args);
  if (result.spawnError) throw new Error(`git could not be started: ${result.spawnError}`);
  if (result.timedOut) throw new Error(`git ${args[0]} timed out after ${Math.round(timeoutMs / 1000)} s`);
  if (result.exitCode !== 0) {
    const detail = result.stderr.trim().split("\n").slice(-5).join("\n") || `exit code ${result.exitCode}`;
    throw new Error(detail);
  }
  return result.stdout;
}

/**
 * `git clone --depth 1 -- <url> <dest>` as the runner, into a fresh empty directory: cloning runs
 * nothing of the repository's own.
 */
export async function gitClone(
  url: string,
  dest: string,
  options: { timeoutMs: number; env: Record<string, string> },
): Promise<void> {
  checkGitUrl(url);
  const run: GitRun = (args) =>
    runProcess({
      command: "git",
      args,
      cwd: dest,
      env: { ...options.env, ...GIT_ENV },
      timeoutMs: options.timeoutMs,
      stdoutLimitBytes: 1024 * 1024,
      stderrLimitBytes: 64 * 1024,
    });
  await git(run, ["clone", "--depth", "1", "--", url, dest], options.timeoutMs);
}

/** Fetches the remote's default branch (run in the plugin's sandbox, as the plugin's user). */
export async function gitFetch(run: GitRun, timeoutMs: number): Promise<void> {
  await git(run, ["fetch", "--depth", "1", "origin"], timeoutMs);
}

/** A file's content at FETCH_HEAD, or undefined when it does not exist there. */
export async function gitShowFetched(
  run: GitRun,
  path: string,
  timeoutMs: number,
): Promise<string | undefined> {
  try {
    return await git(run, ["show", `FETCH_HEAD:${path}`], timeoutMs);
  } catch {
    return undefined;
  }
}

export async function gitResetToFetched(run: GitRun, timeoutMs: number): Promise<void> {
  await git(run, ["reset", "--hard", "FETCH_HEAD"], timeoutMs);
}

/** The checked-out commit. */
export async function gitHead(run: GitRun, timeoutMs: number): Promise<string> {
  return git(run, ["rev-parse", "HEAD"], timeoutMs);
}

/** Back to a commit the repository had (an update that turned out unusable). */
export async function gitResetTo(run: GitRun, commit: string, timeoutMs: number): Promise<void> {
  if (!/^[0-9a-f]{7,64}$/.test(commit)) throw new Error(`not a commit: ${commit}`);
  await git(run, ["reset", "--hard", commit], timeoutMs);
}

import { lstat, mkdir, chmod } from "node:fs/promises";
import { join } from "node:path";
import { Outbox, Sandbox, addStateArchiveRoute, createServiceClient, errorMessage } from "@stavrobot/common";
import type { Logger, Owner, ServiceParts } from "@stavrobot/common";
import type { TaskOutcome } from "./claude.js";
import { ClaudeCli } from "./claude.js";
import type { CoderConfig, CoderEnv } from "./config.js";
import { coderConfig } from "./config.js";
import { CredentialStore, CredentialsError } from "./credentials.js";
import { PluginRefusal, ensureAccount, inspectPlugin } from "./plugin.js";
import { stagePrompts } from "./prompts.js";
import { buildRoutes } from "./routes.js";
import type { CodingTask } from "./tasks.js";
import { TaskQueue } from "./tasks.js";

/** Knobs tests turn; production uses the defaults. */
export interface CoderOverrides {
  outboxBaseDelayMs?: number;
  outboxMaxDelayMs?: number;
  maxConcurrent?: number;
}

export interface Coder extends ServiceParts {
  queue: TaskQueue;
  outbox: Outbox;
  sandbox: Sandbox;
}

/**
 * Wires the coder's parts (the skeleton's `build`): sandbox, staged prompts, the CLI, the lent
 * login, the outbox and the task queue; then picks up what a previous run left behind.
 */
export async function buildCoder(
  context: { env: CoderEnv; secret: string; logger: Logger },
  overrides: CoderOverrides = {},
): Promise<Coder> {
  const { secret, logger } = context;
  const config = coderConfig(context.env);
  const asRoot = process.getuid?.() === 0;
  const sandbox = Sandbox.create({ logger: logger.child("sandbox"), disableNamespaces: config.plainSandbox });
  const prompts = await stagePrompts(sandbox.mode === "namespaces");
  const cli = new ClaudeCli({ sandbox, prompts, config });
  const store =
    config.auth.kind === "subscription" ? new CredentialStore(config.auth.credentialsDir) : undefined;
  if (config.auth.kind === "subscription") await makePrivateDir(config.auth.credentialsDir);
  await makePrivateDir(config.stateDir);

  const outbox = new Outbox({
    dir: join(config.stateDir, "outbox"),
    keyPrefix: "coder",
    name: "coder",
    app: createServiceClient({ baseUrl: config.appInternalUrl, bearer: secret }),
    logger: logger.child("outbox"),
    baseDelayMs: overrides.outboxBaseDelayMs,
    maxDelayMs: overrides.outboxMaxDelayMs,
  });
  const run = (task: CodingTask) => runTask(task, { config, asRoot, cli, store, logger });
  const queue = new TaskQueue({
    dir: join(config.stateDir, "tasks"),
    outbox,
    run,
    recover: async (task) => {
      const dir = join(config.pluginsDir, task.plugin);
      const info = await lstat(dir).catch(() => undefined);
      if (!store || !info?.isDirectory()) return;
      const owner = asRoot && info.uid !== 0 ? { uid: info.uid, gid: info.gid } : undefined;
      await store.reclaim(dir, owner);
    },
    maxConcurrent: overrides.maxConcurrent,
    logger: logger.child("tasks"),
  });
  await outbox.start();
  await queue.start();
  if (!cli.locate()) {
    logger.warn("the Claude Code CLI was not found: tasks will fail until it is installed", {
      claudePath: config.claudePath,
    });
  }
  logger.info("coder ready", { sandbox: sandbox.mode, auth: config.auth.kind, model: config.model });
  return {
    // Its login and its state, for the app's full backup (`GET /state-archive`).
    router: addStateArchiveRoute(
      buildRoutes({ pluginsDir: config.pluginsDir, asRoot, queue }),
      [
        ...(config.auth.kind === "subscription" ? [{ name: "coder", dir: config.auth.credentialsDir }] : []),
        { name: "coder-state", dir: config.stateDir },
      ],
      logger,
    ),
    health: () => ({ sandbox: sandbox.status, claude: cli.locate() !== undefined, auth: config.auth.kind }),
    stop: async () => {
      queue.stop();
      await outbox.stop();
      await prompts.remove();
    },
    queue,
    outbox,
    sandbox,
  };
}

interface TaskContext {
  config: Readonly<CoderConfig>;
  asRoot: boolean;
  cli: ClaudeCli;
  store: CredentialStore | undefined;
  logger: Logger;
}

/** One task: check the plugin again, lend the login, run the agent, take the login back. */
async function runTask(task: CodingTask, context: TaskContext): Promise<TaskOutcome> {
  const { config, asRoot, cli, store, logger } = context;
  let target;
  try {
    target = await inspectPlugin(config.pluginsDir, task.plugin, asRoot);
  } catch (error) {
    if (error instanceof PluginRefusal) return { ok: false, reason: error.message };
    throw error;
  }
  if (target.owner) await ensureAccount(target.owner, logger);
  let lent: string | undefined;
  if (store) {
    try {
      lent = (await store.lend(target.dir, target.owner)).lent;
    } catch (error) {
      if (!(error instanceof CredentialsError)) throw error;
      return { ok: false, reason: `the Claude login could not be given to the agent: ${error.message}` };
    }
  }
  let outcome: TaskOutcome;
  let notes: string[] = [];
  try {
    outcome = await cli.run(target, task.message);
  } finally {
    // Also when the run threw: the login never stays in the plugin directory.
    if (store) notes = await reclaim(store, target.dir, target.owner, lent);
  }
  if (notes.length === 0) return outcome;
  logger.warn("the login was not fully taken back", { taskId: task.taskId, notes });
  return outcome.ok
    ? { ok: true, text: `${outcome.text}\n\n(${notes.join(" ")})` }
    : { ok: false, reason: `${outcome.reason}\n(${notes.join(" ")})` };
}

async function reclaim(
  store: CredentialStore,
  dir: string,
  owner: Owner | undefined,
  lent: string | undefined,
): Promise<string[]> {
  try {
    return await store.reclaim(dir, owner, lent);
  } catch (error) {
    return [`The login could not be taken back out of the plugin directory: ${errorMessage(error)}.`];
  }
}

/** A directory only the coder may read (created if needed; an existing one is left as it is). */
async function makePrivateDir(dir: string): Promise<void> {
  if (await lstat(dir).catch(() => undefined)) return;
  await mkdir(dir, { recursive: true, mode: 0o700 });
  await chmod(dir, 0o700);
}

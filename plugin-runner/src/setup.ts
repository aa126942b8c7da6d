import { chmod } from "node:fs/promises";
import { join } from "node:path";
import { DomainError, chownTree, errorMessage } from "@stavrobot/common";
import type { InstallResponse, Logger, Outbox } from "@stavrobot/common";
import type { ApprovalStore } from "./approvals.js";
import type { BackgroundTasks } from "./background.js";
import type { RunOutcome } from "./chat-messages.js";
import { initResultMessage } from "./chat-messages.js";
import type { Executor } from "./executor.js";
import type { Formats } from "./formats/index.js";
import { describeInstall } from "./install-summary.js";
import type { InstallProgress } from "./install-jobs.js";
import {
  configStatus,
  missingRequired,
  readConfigValues,
  withDefaults,
  writeConfigValues,
} from "./plugin-config.js";
import type { Plugin } from "./formats/format.js";
import type { PermissionStore } from "./permissions.js";
import type { PluginStore } from "./plugins.js";
import { toolClashes } from "./plugins.js";
import { truncateInstructions } from "./present.js";
import type { RunningRecords } from "./running.js";
import type { Isolation } from "./users.js";

/** What setting a plugin up needs (the lifecycle's dependencies include these). */
export interface SetupDeps {
  pluginsDir: string;
  plugins: PluginStore;
  formats: Formats;
  executor: Executor;
  isolation: Isolation;
  outbox: Outbox;
  running: RunningRecords;
  permissions: PermissionStore;
  background: BackgroundTasks;
  approvals: ApprovalStore;
  logger: Logger;
}

/** Gives a freshly placed or updated plugin to its user, applies defaults and runs its init. */
export async function setUpPlugin(
  deps: SetupDeps,
  name: string,
  verb: "installed" | "updated",
  progress?: InstallProgress,
): Promise<InstallResponse> {
  const { executor, isolation, logger } = deps;
  const dir = join(deps.pluginsDir, name);
  const owner = await isolation.ensureUser(name);
  if (owner) await chownTree(dir, owner);
  await chmod(dir, 0o700);
  deps.plugins.invalidate(name);
  let plugin: Plugin;
  try {
    plugin = (await deps.formats.load({ dir, expectedName: name })).plugin;
  } catch (error) {
    // Formats that run the plugin to learn its tools (Workbench) fail here: the plugin's failure.
    throw new DomainError("failed", `The plugin could not be loaded: ${errorMessage(error)}`);
  }
  if (!deps.permissions.has(name)) await deps.permissions.set(name, ["*"]);
  const defaults = withDefaults(plugin, await readConfigValues(dir, logger));
  await writeConfigValues(dir, defaults.values, deps.permissions.get(name), owner);
  const applied = defaults.applied;
  let initOutput: string | undefined;
  if (plugin.init && !plugin.init.async) {
    progress?.("init");
    const outcome = await runInit(deps.formats, plugin, executor.limits.syncTimeoutMs);
    // The plugin's own failure, not the runner's: the caller is told what its script said.
    if (!outcome.success) throw new DomainError("failed", `Init script failed: ${outcome.error}`);
    initOutput = typeof outcome.output === "string" ? outcome.output : JSON.stringify(outcome.output);
  }
  if (plugin.init?.async) {
    const id = await deps.running.begin({ plugin: name });
    deps.background.run(`init ${name}`, async () => {
      const outcome = await runInit(deps.formats, plugin, executor.limits.asyncTimeoutMs);
      await deps.outbox.enqueue(initResultMessage(name, outcome), { id });
      await deps.running.end(id);
    });
  }
  const values = await readConfigValues(dir, logger);
  const missing = missingRequired(plugin, values);
  const instructions = truncateInstructions(plugin.instructions);
  const config = configStatus(plugin, values);
  const clashes = await toolClashes(deps.plugins, plugin);
  const waiting = deps.approvals.waiting(plugin);
  if (waiting.length > 0) await deps.approvals.announce(plugin);
  const warnings = [...plugin.skipped, ...clashes];
  const { message, summary } = describeInstall({
    name,
    verb,
    format: plugin.format,
    version: plugin.version,
    waiting,
    declared: plugin.declared,
    applied,
    missing,
    hasInstructions: Boolean(instructions),
    asyncInit: Boolean(plugin.init?.async),
    warnings,
  });
  return {
    name,
    description: plugin.description,
    ...(config ? { config } : {}),
    ...(instructions ? { instructions } : {}),
    ...(initOutput ? { init_output: initOutput } : {}),
    ...(missing.length > 0 ? { missing_config: missing } : {}),
    ...(warnings.length > 0 ? { warnings } : {}),
    format: plugin.format,
    message,
    summary,
  };
}

/** Runs the plugin's init script through its format (only formats with init scripts declare one). */
function runInit(formats: Formats, plugin: Plugin, timeoutMs: number): Promise<RunOutcome> {
  const init = formats.get(plugin.format).init;
  return init ? init(plugin, timeoutMs) : Promise.resolve({ success: true, output: "" });
}

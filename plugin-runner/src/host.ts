import { chmod, mkdir, readdir, rm } from "node:fs/promises";
import { dirname, join } from "node:path";
import {
  Outbox,
  PLUGIN_NAME_PATTERN,
  Sandbox,
  createServiceClient,
  errorMessage,
  firstClosedAncestor,
  pathReachableBy,
} from "@stavrobot/common";
import type { Logger } from "@stavrobot/common";
import { BackgroundTasks } from "./background.js";
import type { ToolEnvConfig } from "./config.js";
import { DEFAULT_TOOL_PATH } from "./config.js";
import { Executor } from "./executor.js";
import { DEFAULT_LIMITS, type Limits } from "./limits.js";
import { Formats } from "./formats/index.js";
import { stavrobotFormat } from "./formats/stavrobot.js";
import { cyclopOneFormat } from "./formats/cyclopone.js";
import { workbenchFormat } from "./formats/workbench.js";
import { WorkbenchHosts } from "./formats/workbench-hosts.js";
import { mcpDeclaredPlugins, mcpFormat } from "./formats/mcp.js";
import { osaurusFormat } from "./formats/osaurus.js";
import { OsaurusHosts } from "./formats/osaurus-hosts.js";
import { osaurusPackages } from "./osaurus/install.js";
import { parseMinisignKey } from "./osaurus/minisign.js";
import { McpServers } from "./mcp/servers.js";
import { OwnerQuestions } from "./mcp/elicitation.js";
import { InstallJobs } from "./install-jobs.js";
import { Lifecycle } from "./lifecycle.js";
import { PermissionStore } from "./permissions.js";
import { ApprovalStore } from "./approvals.js";
import { NetworkPolicy } from "./network.js";
import { SourceStore } from "./sources.js";
import { PluginWatcher } from "./watch.js";
import { PluginStore } from "./plugins.js";
import { RunningRecords } from "./running.js";
import type { ServerDeps } from "./server.js";
import { ToolService } from "./tool-service.js";
import type { Isolation } from "./users.js";
import { createIsolation } from "./users.js";

export interface PluginHostOptions {
  pluginsDir: string;
  cacheDir: string;
  /** Per-plugin persistent data (Cyclop One's data directories); default `<cacheDir>/../plugin-data`. */
  dataDir?: string;
  /** The service's private state: outbox, running records, permissions, run directories. */
  stateDir: string;
  /** Parent of the per-run work directories (namespaces mode); default `<stateDir>/runs`. */
  runsDir?: string;
  /** Plain mode: where `<plugin>` work directories live; default the real /tmp. */
  tmpDir?: string;
  appInternalUrl: string;
  secret: string;
  logger: Logger;
  toolEnv?: ToolEnvConfig;
  /** The service's HOME: runtimes under it are mounted for tools. */
  home?: string;
  limits?: Partial<Limits>;
  /** Per-plugin users; defaults to "running as root". */
  isolation?: boolean;
  /** Force the plain sandbox (no namespaces). */
  plainSandbox?: boolean;
  /** Where the sandbox looks for bwrap, setpriv and prlimit; default this process's PATH. */
  sandboxPath?: string;
  /**
   * Run plugins that must not have network even where the sandbox cannot remove it (plain mode):
   * the owner's `[plugins] allowWithoutNetworkCut`. Default false.
   */
  allowWithoutNetworkCut?: boolean;
  /** Cache parsed manifests (default); false only to measure what the cache saves. */
  cacheManifests?: boolean;
  /** The owner's MCP server declarations, as the app writes them from config.toml (absent: none). */
  mcpServersFile?: string;
  outboxBaseDelayMs?: number;
  outboxMaxDelayMs?: number;
  gitTimeoutMs?: number;
  /** The owner's trusted minisign public keys for Osaurus packages (base64 `RW…` lines). */
  osaurusTrustedKeys?: readonly string[];
}

/**
 * The plugin-runner's domain, wired: the plugin store, the executor, the lifecycle, the tool
 * service, the outbox and the per-plugin users, ready to be put behind the routes.
 */
export interface PluginHost {
  readonly deps: ServerDeps;
  /** The Workbench plugins' kept processes. */
  readonly workbench: WorkbenchHosts;
  /** The owner's MCP servers. */
  readonly mcp: McpServers;
  /** The Osaurus plugins' host processes. */
  readonly osaurus: OsaurusHosts;
  /** Picks up plugins put into the plugins directory by hand. */
  readonly watcher: PluginWatcher;
  readonly outbox: Outbox;
  readonly background: BackgroundTasks;
  readonly isolation: Isolation;
  readonly sandbox: Sandbox;
  /**
   * Prepares directories, adopts existing plugins, turns runs a previous process left unfinished
   * into results, ends leftover plugin processes and re-sends what the outbox holds.
   */
  start(): Promise<void>;
  /** Stops deliveries; pending results stay on disk for the next start. */
  stop(): Promise<void>;
  /** Resolves once finished runs' temporary directories are removed (done after answering). */
  settle(): Promise<void>;
}

/** Wires the plugin-runner's parts together. Paths must be absolute. */
export function createPluginHost(options: PluginHostOptions): PluginHost {
  const logger = options.logger;
  const limits: Limits = { ...DEFAULT_LIMITS, ...options.limits };
  const enabled = options.isolation ?? process.getuid?.() === 0;
  const isolation = createIsolation({ enabled, logger: logger.child("users") });
  const toolEnv = options.toolEnv ?? { path: DEFAULT_TOOL_PATH };
  const sandbox = Sandbox.create({
    logger: logger.child("sandbox"),
    disableNamespaces: options.plainSandbox,
    ...(options.sandboxPath !== undefined ? { path: options.sandboxPath } : {}),
  });
  const runsDir = options.runsDir ?? join(options.stateDir, "runs");
  const background = new BackgroundTasks(logger);
  const permissions = new PermissionStore(join(options.stateDir, "permissions.json"));
  const sources = new SourceStore(join(options.stateDir, "sources.json"));
  const running = new RunningRecords(join(options.stateDir, "running"), logger.child("running"));
  const app = createServiceClient({ baseUrl: options.appInternalUrl, bearer: options.secret });
  const outbox = new Outbox({
    dir: join(options.stateDir, "outbox"),
    keyPrefix: "plugin-runner",
    app,
    logger: logger.child("outbox"),
    baseDelayMs: options.outboxBaseDelayMs,
    maxDelayMs: options.outboxMaxDelayMs,
  });
  const dataDir = options.dataDir ?? join(dirname(options.cacheDir), "plugin-data");
  const network = new NetworkPolicy(
    join(options.stateDir, "network.json"),
    sandbox.enforcesNetworkRemoval,
    options.allowWithoutNetworkCut ?? false,
  );
  const executor = new Executor({
    cacheDir: options.cacheDir,
    dataDir,
    networkOf: (plugin) => network.allows(plugin),
    runsDir,
    tmpDir: options.tmpDir,
    isolation,
    sandbox,
    toolEnv,
    home: options.home,
    limits,
    logger: logger.child("run"),
  });
  // The store is made after the formats; a Workbench plugin whose tools changed by themselves is reread.
  let changed: (plugin: string) => void = () => {};
  const workbenchHosts = new WorkbenchHosts(executor, logger.child("workbench"), (plugin) => changed(plugin));
  // An MCP server's questions go to the owner through the app, at once (never the outbox: an
  // answer later than the call is worth nothing); one that cannot be told is cancelled.
  const questions = new OwnerQuestions({
    tell: async (question) => {
      await app.request("POST", "/questions", { body: question, timeoutMs: 10_000, retries: 0 });
    },
    logger: logger.child("questions"),
  });
  const mcp = new McpServers({
    questions,
    ...(options.mcpServersFile ? { file: options.mcpServersFile } : {}),
    executor,
    network,
    isolation,
    dataDir,
    grantsFile: join(options.stateDir, "mcp-grants.json"),
    oauthFile: join(options.stateDir, "mcp-oauth.json"),
    logger: logger.child("mcp"),
    changed: (plugin) => changed(plugin),
  });
  const osaurusHosts = new OsaurusHosts(executor, logger.child("osaurus"));
  const osaurusKeys = (options.osaurusTrustedKeys ?? []).map((key, index) => {
    try {
      return parseMinisignKey(key);
    } catch (error) {
      throw new Error(`Osaurus trusted key #${index + 1}: ${(error as Error).message}`, { cause: error });
    }
  });
  const formats = new Formats([
    // First: its marker is the runner's own, and a package may hold any other format's files.
    osaurusFormat(osaurusHosts, executor),
    stavrobotFormat(executor),
    cyclopOneFormat(executor),
    workbenchFormat(workbenchHosts),
    mcpFormat(mcp),
  ]);
  const plugins = new PluginStore(
    options.pluginsDir,
    logger.child("plugins"),
    formats,
    options.cacheManifests ?? true,
    mcpDeclaredPlugins(mcp),
  );
  changed = (plugin) => plugins.invalidate(plugin);
  const gitEnv: Record<string, string> = {
    PATH: process.env.PATH ?? DEFAULT_TOOL_PATH,
    HOME: process.env.HOME ?? "/root",
  };
  if (toolEnv.sslCertFile) gitEnv.SSL_CERT_FILE = toolEnv.sslCertFile;
  const approvals = new ApprovalStore(join(options.stateDir, "approvals.json"), outbox);
  const lifecycle = new Lifecycle({
    pluginsDir: options.pluginsDir,
    cacheDir: options.cacheDir,
    dataDir,
    plugins,
    formats,
    executor,
    isolation,
    outbox,
    running,
    permissions,
    sources,
    approvals,
    network,
    background,
    logger: logger.child("lifecycle"),
    gitEnv,
    gitTimeoutMs: options.gitTimeoutMs ?? 120_000,
    packages: osaurusPackages({ pluginsDir: options.pluginsDir, formats, trustedKeys: osaurusKeys }),
  });
  const tools = new ToolService({
    plugins,
    formats,
    approvals,
    network,
    executor,
    outbox,
    running,
    permissions,
    background,
    app,
    logger: logger.child("tools"),
  });
  const watcher = new PluginWatcher({
    pluginsDir: options.pluginsDir,
    formats,
    plugins,
    lifecycle,
    approvals,
    logger: logger.child("watch"),
  });
  const installJobs = new InstallJobs({
    installer: lifecycle,
    background,
    logger: logger.child("install-jobs"),
  });
  const deps: ServerDeps = {
    secret: options.secret,
    logger,
    plugins,
    formats,
    tools,
    lifecycle,
    installJobs,
    permissions,
    sources,
    approvals,
    network,
    mcp,
    questions,
    sandbox: sandbox.status,
    state: [
      { name: "plugins", dir: options.pluginsDir },
      { name: "plugin-data", dir: dataDir },
      // Run directories are scratch, made again for each run.
      {
        name: "plugin-runner",
        dir: options.stateDir,
        skip: (name) => join(options.stateDir, name) === runsDir,
      },
    ],
  };

  return {
    deps,
    workbench: workbenchHosts,
    mcp,
    osaurus: osaurusHosts,
    watcher,
    outbox,
    background,
    isolation,
    sandbox,
    async start() {
      const { pluginsDir, cacheDir, stateDir } = options;
      // Modes are set explicitly: the process umask may be anything (the app's is 077).
      await mkdir(stateDir, { recursive: true, mode: 0o700 });
      await chmod(stateDir, 0o700);
      await mkdir(runsDir, { recursive: true, mode: 0o700 });
      await chmod(runsDir, 0o700);
      for (const dir of [pluginsDir, cacheDir, dataDir]) {
        await mkdir(dir, { recursive: true, mode: 0o711 });
        // Plain mode: plugin users pass through to their own directory but cannot list the others.
        await chmod(dir, enabled ? 0o711 : 0o700);
      }
      // Plain mode uses the real paths: plugin users must be able to walk down to them.
      if (enabled && sandbox.mode === "plain") {
        for (const dir of [pluginsDir, cacheDir, dataDir]) await warnIfUnreachable(dir, logger);
        await keepReachableRuntimes(toolEnv.path, executor, logger);
      }
      if (!enabled) {
        logger.warn(
          "Per-plugin users are OFF: the runner is not root, so every plugin runs as the current user. " +
            (sandbox.mode === "namespaces"
              ? "Each run still sees only its own plugin's files."
              : "Plugins can read each other's files and configuration.") +
            " Run the runner as root (as the container does) for per-plugin users.",
        );
      }
      await removeEntries(pluginsDir, (name) => name.startsWith(".tmp-install-"));
      await removeEntries(runsDir, () => true);
      await permissions.load();
      await sources.load();
      await approvals.load();
      await network.load();
      if (!network.enforced) {
        logger.warn(
          network.allowWithoutCut
            ? "The sandbox cannot remove the network here (plain mode): plugins that must run without network (Cyclop One plugins without the network permission, plugins the owner switched off) run WITH it, as the owner's configuration allows."
            : "The sandbox cannot remove the network here (plain mode): plugins that must run without network (Cyclop One plugins without the network permission, plugins the owner switched off) will not run. Install bubblewrap, or set [plugins] allowWithoutNetworkCut = true in config.toml to run them anyway.",
        );
      }
      const adopted = await adoptPlugins(pluginsDir, lifecycle, logger);
      // Whatever a previous process left running (detached processes, cut-off async runs) ends now.
      await isolation.killProcessesOf(adopted);
      // Folders to rename, plugins waiting for approval; then whatever is put in by hand.
      watcher.start(adopted);
      await watcher.scan();
      await outbox.start();
      // Started now, in the background: see the README ("MCP servers").
      await mcp.start();
      const interrupted = await running.recover(outbox);
      if (interrupted.length > 0)
        logger.warn("background runs were cut off by a restart", { plugins: interrupted });
    },
    async stop() {
      watcher.stop();
      await outbox.stop();
      await formats.stopAll();
      await executor.settle();
    },
    settle: () => executor.settle(),
  };
}

/** Plugin users need execute permission on every parent of the plugin and cache directories. */
async function warnIfUnreachable(dir: string, logger: Logger): Promise<void> {
  const closed = await firstClosedAncestor(dir);
  if (!closed) return;
  logger.error(
    `plugin users cannot reach ${dir}: ${closed} is not searchable by other users, and without ` +
      `bubblewrap tools run on the real paths, so they will fail to start. Install bubblewrap, put the ` +
      `data directory somewhere others can traverse (DATA_DIR, or PLUGINS_DIR / PLUGIN_CACHE_DIR), ` +
      `or run: chmod o+x ${closed}`,
  );
}

/**
 * A runtime on the tools' PATH under a private home (`python3` as a pyenv shim in /root) is
 * invisible to plugin users in plain mode: a tool started through it (`#!/usr/bin/env python3`)
 * would fail with "Permission denied" although a system one further on the PATH works. Tools get
 * the PATH without such directories; said once at start-up, naming them and the fix.
 */
async function keepReachableRuntimes(path: string, executor: Executor, logger: Logger): Promise<void> {
  const reachable = await pathReachableBy(path);
  if (reachable.dropped.length === 0) return;
  executor.useToolPath(reachable.path);
  logger.warn(
    `plugin tools cannot use the programs in ${reachable.dropped.join(", ")} (other users cannot pass ` +
      `through to them), so their PATH leaves them out: a tool finds the system's programs instead, and one ` +
      `that needs those (e.g. \`#!/usr/bin/env -S uv run\` with uv only there) fails. Install bubblewrap, ` +
      `install the runtime system-wide, or make its directories searchable (chmod o+x).`,
  );
}

async function removeEntries(dir: string, match: (name: string) => boolean): Promise<void> {
  for (const name of await readdir(dir).catch(() => [] as string[])) {
    if (match(name)) await rm(join(dir, name), { recursive: true, force: true });
  }
}

/** Plugins copied in by hand, or from before a restart: each gets its user, its files and its permissions. */
async function adoptPlugins(pluginsDir: string, lifecycle: Lifecycle, logger: Logger): Promise<string[]> {
  const entries = await readdir(pluginsDir, { withFileTypes: true });
  const names: string[] = [];
  for (const entry of entries) {
    if (!entry.isDirectory() || !PLUGIN_NAME_PATTERN.test(entry.name)) continue;
    names.push(entry.name);
    try {
      await lifecycle.adopt(entry.name);
    } catch (error) {
      logger.error("could not prepare plugin", { plugin: entry.name, error: errorMessage(error) });
    }
  }
  return names;
}

import type { RunProgress } from "../formats/format.js";
import { rm } from "node:fs/promises";
import { join } from "node:path";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import {
  CallToolResultSchema,
  ErrorCode,
  McpError,
  PromptListChangedNotificationSchema,
  ResourceListChangedNotificationSchema,
  ResourceUpdatedNotificationSchema,
  ToolListChangedNotificationSchema,
} from "@modelcontextprotocol/sdk/types.js";
import type {
  CallToolResult,
  ElicitRequestFormParams,
  ElicitResult,
  ServerCapabilities,
  Tool,
} from "@modelcontextprotocol/sdk/types.js";
import { KeptProcess, errorMessage, isMcpClientTool } from "@stavrobot/common";
import type { Logger, McpServerDeclaration, McpServerStatus, ProcessExit } from "@stavrobot/common";
import type { Executor } from "../executor.js";
import type { NetworkPolicy } from "../network.js";
import type { RunOutcome } from "../chat-messages.js";
import { connectRemote, newClient } from "./connect.js";
import { CallClock, formFields } from "./elicitation.js";
import { ResourceWatch } from "./subscriptions.js";
import type { OwnerQuestions } from "./elicitation.js";
import type { McpGrants } from "./grants.js";
import { ServerOAuth, isSignInFailure, usesOAuth } from "./oauth.js";
import type { OAuthStore } from "./oauth-store.js";
import { schemaProblems } from "../formats/json-schema.js";
import { runClientTool } from "./features.js";
import { grantedRoots, namedMounts, namedPaths } from "./named-paths.js";
import { Redactor } from "./redact.js";
import { callOutcome } from "./result.js";
import { ProcessTransport } from "./transport.js";

export interface McpServerDeps {
  executor: Executor;
  network: NetworkPolicy;
  /** Per-server state directories (each server's HOME) live here: `<dataDir>/<name>`. */
  dataDir: string;
  /** Write access for a server's own user to the paths its declaration names. */
  grants: McpGrants;
  logger: Logger;
  /** Where OAuth sign-ins are kept (a remote server without an Authorization header signs in). */
  oauth?: OAuthStore;
  /** Told when the server's tools changed (listed again after a start or a list_changed). */
  changed(name: string): void;
  /** Where its questions (elicitation) go: to the owner, through the app. */
  questions?: OwnerQuestions;
}

/** A call of one of the server's tools in flight: its tool and its clock (which a question pauses). */
interface CallInFlight {
  tool: string;
  clock: CallClock;
}

/** How long a server has after a cancellation to show it still answers (a ping) before it is restarted. */
const CANCEL_GRACE_MS = 2_000;
/** A server that ran this long without failing counts as well again. */
const HEALTHY_AFTER_MS = 30_000;
const RETRY_BASE_MS = 1_000;
const RETRY_MAX_MS = 60_000;

/**
 * One MCP server the owner declared. A stdio server is a kept process in the plugin sandbox, as its
 * own user, HOME its own state directory, the paths its declaration names shown (named-paths.ts)
 * and writable where they may be (grants.ts), no network when it must have none; it is restarted with a growing delay when it crashes or fails to start.
 * A remote server is a client over Streamable HTTP (or HTTP+SSE), connected again after a failure.
 * Every text that leaves (logs, errors, results) has the declaration's secret values removed.
 */
export class McpServer {
  readonly redact: Redactor;
  private readonly logger: Logger;
  private kept: KeptProcess<Client> | undefined;
  private remote: { client: Client; transport: "streamable-http" | "sse" } | undefined;
  private connecting: Promise<Client> | undefined;
  private stopped = false;
  /** The OAuth provider of a remote server without an owner's Authorization header (oauth.ts). */
  readonly oauth: ServerOAuth | undefined;
  private retryTimer: NodeJS.Timeout | undefined;
  private healthyTimer: NodeJS.Timeout | undefined;
  tools: Tool[] = [];
  /** What its handshake said it offers (resources, prompts: the client's own tools, features.ts). */
  capabilities: ServerCapabilities | undefined;
  /** The paths its declaration gave it, told as its roots (`roots/list`); none for a remote server. */
  roots: string[] = [];
  instructions: string | undefined;
  serverTitle: string | undefined;
  status: McpServerStatus;
  /** Its tools' calls in flight: a question it asks pauses their clocks while the owner answers. */
  private readonly calls = new Set<CallInFlight>();
  /** The resources the model read, followed where the server offers subscriptions. */
  private readonly watch = new ResourceWatch();

  constructor(
    readonly name: string,
    readonly declaration: McpServerDeclaration,
    private readonly deps: McpServerDeps,
  ) {
    this.redact = new Redactor([...Object.values(declaration.env), ...Object.values(declaration.headers)]);
    this.logger = this.redact.logger(deps.logger);
    this.status = {
      transport: declaration.command ? "stdio" : declaration.type === "sse" ? "sse" : "streamable-http",
      state: declaration.enabled ? "starting" : "disabled",
      failures: 0,
    };
    if (deps.oauth && usesOAuth(declaration)) {
      this.oauth = new ServerOAuth({
        name,
        declaration,
        store: deps.oauth,
        changed: () => this.showSignIn(),
      });
      this.showSignIn();
    }
  }

  /** `signIn` on its status: `needed` while the owner must sign in (again), `ok` once tokens hold. */
  private showSignIn(): void {
    if (!this.oauth) return;
    const needed = this.oauth.needsSignIn || this.oauth.lapsed !== undefined;
    const signedIn = this.deps.oauth?.get(this.name).tokens !== undefined;
    if (needed) this.status.signIn = "needed";
    else if (signedIn) this.status.signIn = "ok";
    else delete this.status.signIn;
  }

  get dir(): string {
    return join(this.deps.dataDir, this.name);
  }

  /** The plugin view the executor and the network policy take. */
  get pluginView() {
    return { name: this.name, dir: this.dir, network: this.declaration.network };
  }

  get timeoutMs(): number {
    return this.declaration.timeoutSeconds * 1000;
  }

  /** How long a start and its handshake may take (a first `npx -y` downloads the package). */
  get startTimeoutMs(): number {
    return this.declaration.startTimeoutSeconds * 1000;
  }

  /** How long the owner may take, in all, to answer its questions during one call. */
  get questionTimeoutMs(): number {
    return this.declaration.questionTimeoutSeconds * 1000;
  }

  /** Starts it now, in the background (the runner starts every enabled server when it starts). */
  startSoon(): void {
    if (!this.declaration.enabled) return;
    this.client().catch(() => {});
  }

  /** The connected client, starting (or restarting) the server first when needed. */
  async client(): Promise<Client> {
    if (this.stopped) throw new Error(`MCP server "${this.name}" is stopped`);
    if (!this.declaration.enabled) throw new Error(`MCP server "${this.name}" is disabled in config.toml`);
    clearTimeout(this.retryTimer);
    try {
      if (this.declaration.command) {
        this.kept ??= this.keptProcess();
        return await this.kept.session();
      }
      if (this.remote) return this.remote.client;
      this.connecting ??= this.connectRemote()
        .catch((error: unknown) => {
          this.failed(error);
          throw error;
        })
        .finally(() => (this.connecting = undefined));
      return await this.connecting;
    } catch (error) {
      throw new Error(this.redact.text(errorMessage(error)), { cause: error });
    }
  }

  /**
   * Runs one tool: one of the server's, or one of the client's own (its resources and prompts,
   * features.ts); every failure is an outcome the model reads, never an exception.
   */
  async call(
    tool: string,
    args: Record<string, unknown>,
    timeoutMs: number,
    onProgress?: (progress: RunProgress) => void,
  ): Promise<RunOutcome> {
    let client: Client;
    try {
      client = await this.client();
    } catch (error) {
      return {
        success: false,
        error: `MCP server "${this.name}" could not be started: ${errorMessage(error)}`,
      };
    }
    const seconds = Math.round(timeoutMs / 100) / 10;
    try {
      if (isMcpClientTool(tool)) {
        const outcome = await runClientTool(tool, args, {
          client,
          server: this.name,
          redact: this.redact,
          timeoutMs,
          watch: this.watch,
        });
        this.status.failures = 0;
        return outcome;
      }
      // Not the SDK's callTool: it checks structured content with the validators of the last page
      // of tools it listed, compiling the server's regular expressions; outputMismatch does it here.
      // Its time limit is a clock of ours, which stops while the server waits for the owner.
      const result = await this.timed(tool, timeoutMs, (signal) =>
        client.request(
          { method: "tools/call", params: { name: tool, arguments: args } },
          CallToolResultSchema,
          {
            signal,
            // Only a backstop: the clock cancels the call first.
            timeout: timeoutMs + this.questionTimeoutMs + 5_000,
            onprogress: (progress) => {
              // The server's words may quote what it was given: its secrets are hidden first.
              const told: RunProgress = {
                progress: progress.progress,
                ...(progress.total !== undefined ? { total: progress.total } : {}),
                ...(progress.message !== undefined ? { message: this.redact.text(progress.message) } : {}),
              };
              this.logger.info("MCP tool progress", { server: this.name, tool, ...told });
              onProgress?.(told);
            },
          },
        ),
      );
      this.status.failures = 0;
      const mismatch = await this.outputMismatch(tool, result);
      if (mismatch) return { success: false, error: this.redact.text(mismatch) };
      return callOutcome(tool, result as Record<string, unknown>, this.redact);
    } catch (error) {
      if (error instanceof McpError && error.code === ErrorCode.RequestTimeout) {
        // The SDK sent notifications/cancelled; a server that does not answer a ping now is hung.
        const alive = await client.ping({ timeout: CANCEL_GRACE_MS }).then(
          () => true,
          () => false,
        );
        if (!alive) this.restart("it did not answer after a call was cancelled");
        return {
          success: false,
          error:
            `Tool "${tool}" of MCP server "${this.name}" did not answer within ${seconds} s and was cancelled` +
            (alive ? "." : "; the server did not answer after that and is being restarted."),
        };
      }
      if (error instanceof McpError && error.code === ErrorCode.ConnectionClosed) {
        return {
          success: false,
          error:
            `MCP server "${this.name}" ended while the tool ran; it is being restarted. ${this.status.lastError ?? ""}`.trim(),
        };
      }
      if (this.oauth?.needsSignIn) this.showSignIn();
      return { success: false, error: this.redact.text(`MCP server "${this.name}": ${errorMessage(error)}`) };
    }
  }

  /**
   * Runs one call of a server's tool under a clock of its own: past `timeoutMs` (not counting the
   * time a question of the server waits for the owner) the call is cancelled as the SDK's own
   * timeout would (notifications/cancelled, RequestTimeout). When the last call ends, a question
   * still waiting is cancelled: nobody waits for its answer any more.
   */
  private async timed<T>(
    tool: string,
    timeoutMs: number,
    call: (signal: AbortSignal) => Promise<T>,
  ): Promise<T> {
    const abort = new AbortController();
    const clock = new CallClock(timeoutMs, this.questionTimeoutMs, () =>
      abort.abort(new McpError(ErrorCode.RequestTimeout, "Request timed out")),
    );
    const inFlight = { tool, clock };
    this.calls.add(inFlight);
    try {
      return await call(abort.signal);
    } finally {
      clock.stop();
      this.calls.delete(inFlight);
      if (this.calls.size === 0) this.deps.questions?.withdraw(this.name);
    }
  }

  /**
   * A question of the server (elicitation, form mode): put to the owner while one of its calls
   * runs, the calls' clocks paused meanwhile, for at most what is left of their time for
   * questions. Outside a call nobody waits for it: it is cancelled without troubling the owner.
   */
  private async ask(params: ElicitRequestFormParams, signal: AbortSignal): Promise<ElicitResult> {
    const questions = this.deps.questions;
    const calls = [...this.calls];
    const limitMs = Math.min(this.questionTimeoutMs, ...calls.map((call) => call.clock.questionTimeLeft()));
    if (!questions || calls.length === 0 || limitMs <= 0) {
      this.logger.info(
        "an MCP server's question was cancelled: no call of it waits, or their time for questions is spent",
        {
          server: this.name,
        },
      );
      return { action: "cancel" };
    }
    let fields;
    try {
      fields = formFields(params.requestedSchema);
    } catch (error) {
      // The SDK's checks let through only the spec's field kinds; this is for what slips past.
      throw new McpError(
        ErrorCode.InvalidParams,
        `The owner is asked only flat forms: ${errorMessage(error)}`,
      );
    }
    const redacted = fields.map((field) => ({
      ...field,
      ...(field.title ? { title: this.redact.text(field.title) } : {}),
      ...(field.description ? { description: this.redact.text(field.description) } : {}),
    }));
    for (const call of calls) call.clock.pause();
    try {
      return await questions.ask({
        server: this.name,
        message: this.redact.text(params.message),
        fields: redacted,
        during: [...new Set(calls.map((call) => call.tool))],
        limitMs,
        signal,
      });
    } finally {
      for (const call of calls) call.clock.resume();
    }
  }

  /**
   * Why a result does not keep the `outputSchema` its tool declared (no structured content, or
   * content the schema refuses), checked with the runner's ajv (json-schema.ts); an error result
   * is not checked.
   */
  private async outputMismatch(tool: string, result: CallToolResult): Promise<string | undefined> {
    const schema = this.tools.find((candidate) => candidate.name === tool)?.outputSchema;
    if (!schema || result.isError === true) return undefined;
    const named = `Tool "${tool}" of MCP server "${this.name}"`;
    const structured = result.structuredContent;
    if (!structured || typeof structured !== "object")
      return `${named} declares an output schema but returned no structured content.`;
    const problems = await schemaProblems(schema, structured);
    return problems
      ? `${named} returned structured content that does not match its output schema: ${problems}`
      : undefined;
  }

  /** Stops it for good (the runner stops). */
  async stop(): Promise<void> {
    this.stopped = true;
    this.deps.questions?.withdraw(this.name);
    clearTimeout(this.retryTimer);
    clearTimeout(this.healthyTimer);
    await this.kept?.stop(1_000);
    await this.remote?.client.close().catch(() => {});
    this.remote = undefined;
  }

  /**
   * The owner signed it in (again): connected anew with its new tokens. The Connect saved them
   * through its own provider, so this server's provider is told the sign-in it missed is made, and
   * the error that said so goes.
   */
  signedIn(): void {
    if (this.oauth) this.oauth.needsSignIn = false;
    delete this.status.lastError;
    this.showSignIn();
    this.status.failures = 0;
    this.restart("the owner signed it in");
    this.startSoon();
  }

  /** Ends the running process (or connection); it is started again with a delay, or on the next use. */
  restart(reason: string): void {
    this.logger.warn("restarting an MCP server", { server: this.name, reason });
    if (this.kept) this.kept.kill();
    else if (this.remote) {
      void this.remote.client.close().catch(() => {});
      this.remote = undefined;
    }
  }

  /** The client's elicitation handler, when questions can reach the owner. */
  private get askOwner() {
    return this.deps.questions
      ? (params: ElicitRequestFormParams, signal: AbortSignal) => this.ask(params, signal)
      : undefined;
  }

  private keptProcess(): KeptProcess<Client> {
    return new KeptProcess<Client>({
      name: `mcp:${this.name}`,
      logger: this.logger,
      restartDelayMs: RETRY_BASE_MS,
      maxRestartDelayMs: RETRY_MAX_MS,
      healthyAfterMs: HEALTHY_AFTER_MS,
      start: () =>
        this.startProcess().catch((error: unknown) => {
          this.failed(error);
          throw error;
        }),
    });
  }

  private async startProcess() {
    const { executor, network } = this.deps;
    this.status.state = nextState(this.status);
    const refusal = network.refusal(this.pluginView);
    if (refusal) throw new Error(refusal);
    const prepared = await executor.prepareForRun(this.dir, this.name);
    const paths = executor.pluginPaths(this.pluginView, prepared, undefined);
    // The paths its declaration names: shown (namespaces), writable where they may be, for its user.
    const named = await namedPaths(this.declaration);
    for (const { path, reason } of named.passed)
      this.logger.warn("a path an MCP server's declaration names is not given to it", {
        server: this.name,
        path,
        reason,
      });
    await this.deps.grants.prepare(this.name, named.paths, prepared.owner);
    this.roots = grantedRoots(named.paths);
    const mounts = executor.namespaces ? [...paths.mounts, ...namedMounts(named.paths)] : paths.mounts;
    const child = executor.startKept(
      prepared,
      { ...paths, mounts },
      {
        command: this.declaration.command as string,
        args: this.declaration.args.map((arg) => inHome(arg, paths.dataRoot)),
        cwd: this.declaration.cwd ? inHome(this.declaration.cwd, paths.dataRoot) : paths.dataRoot,
        env: {
          ...Object.fromEntries(
            Object.entries(this.declaration.env).map(([key, value]) => [key, inHome(value, paths.dataRoot)]),
          ),
          HOME: paths.dataRoot,
        },
      },
    );
    const client = newClient(() => this.roots, this.askOwner);
    client.onerror = (error) =>
      this.logger.debug("MCP client error", { server: this.name, error: errorMessage(error) });
    try {
      await client.connect(new ProcessTransport(child), { timeout: this.startTimeoutMs });
      await this.connected(client, this.startTimeoutMs);
    } catch (error) {
      // A server that exited by itself says how; one still running (a handshake that timed out) is ended.
      const exit = await Promise.race([
        child.exited,
        new Promise<undefined>((resolve) => setTimeout(() => resolve(undefined), 300)),
      ]);
      child.kill();
      await this.forgetHalfInstalledNpx(child.stderrTail());
      const stderr = child.stderrTail().trim().slice(-1_000);
      const how = exit ? ` (${exitText(exit)})` : "";
      throw new Error(`${errorMessage(error)}${how}${stderr ? `; its stderr: ${stderr}` : ""}`, {
        cause: error,
      });
    }
    void child.exited.then((exit) => {
      if (this.stopped) return;
      const stderr = child.stderrTail().trim().slice(-500);
      this.status.state = "restarting";
      this.status.failures++;
      this.status.lastError = this.redact.text(`The server ${exitText(exit)}${stderr ? `: ${stderr}` : ""}`);
      clearTimeout(this.healthyTimer);
    });
    return { process: child, session: client };
  }

  /**
   * A start stopped while `npx -y` was fetching the package (the product stopped, a timeout) leaves
   * npx's copy half installed, and npx runs that copy from then on, failing the same way each time.
   * Such a copy is removed, so the next try fetches it whole.
   */
  private async forgetHalfInstalledNpx(stderr: string): Promise<void> {
    const copy = halfInstalledNpx(stderr);
    if (!copy) return;
    this.logger.warn("npx's copy of an MCP server's package is incomplete; it is fetched again", {
      server: this.name,
      copy,
    });
    await rm(join(this.dir, ".npm", "_npx", copy), { recursive: true, force: true }).catch((error: unknown) =>
      this.logger.warn("could not remove npx's incomplete copy", {
        server: this.name,
        error: errorMessage(error),
      }),
    );
  }

  private async connectRemote(): Promise<Client> {
    this.status.state = nextState(this.status);
    let connected: Awaited<ReturnType<typeof connectRemote>>;
    try {
      connected = await connectRemote(this.declaration, this.startTimeoutMs, this.askOwner, this.oauth);
    } catch (error) {
      // A 401 the SDK could not mend (no sign-in, a refused refresh, a 401 after refreshing).
      if (
        this.oauth &&
        (this.oauth.needsSignIn || isSignInFailure(error) || /\b401\b/.test(errorMessage(error)))
      ) {
        if (!this.oauth.needsSignIn) await this.oauth.lapse("the server refused its token");
        this.showSignIn();
      }
      throw error;
    }
    const { client, transport } = connected;
    this.status.transport = transport;
    client.onclose = () => {
      if (this.remote?.client !== client) return;
      this.remote = undefined;
      if (!this.stopped) this.status.state = "restarting";
    };
    try {
      await this.connected(client, this.startTimeoutMs);
    } catch (error) {
      await client.close().catch(() => {});
      throw error;
    }
    this.remote = { client, transport };
    return client;
  }

  /** After the handshake: its tools (and again whenever it says they changed), its instructions. */
  private async connected(client: Client, timeoutMs = this.timeoutMs): Promise<void> {
    this.instructions = client.getInstructions();
    this.capabilities = client.getServerCapabilities();
    const info = client.getServerVersion();
    this.serverTitle = info?.title ?? info?.name;
    client.setNotificationHandler(ToolListChangedNotificationSchema, async () => {
      try {
        await this.listTools(client);
      } catch (error) {
        this.logger.warn("could not list an MCP server's tools again", {
          server: this.name,
          error: errorMessage(error),
        });
      }
    });
    // Resources and prompts are listed afresh at every call: nothing kept to refresh, but a
    // plugin cached with the old capabilities is read again.
    for (const schema of [PromptListChangedNotificationSchema, ResourceListChangedNotificationSchema])
      client.setNotificationHandler(schema, () => this.deps.changed(this.name));
    this.watch.connected(client, this.capabilities?.resources?.subscribe === true);
    client.setNotificationHandler(ResourceUpdatedNotificationSchema, ({ params }) =>
      this.watch.changed(params.uri),
    );
    await this.listTools(client, timeoutMs);
    this.status.state = "running";
    clearTimeout(this.healthyTimer);
    this.healthyTimer = setTimeout(() => {
      if (this.status.state === "running") this.status.failures = 0;
    }, HEALTHY_AFTER_MS);
    this.healthyTimer.unref();
  }

  private async listTools(client: Client, timeoutMs = this.timeoutMs): Promise<void> {
    const tools: Tool[] = [];
    let cursor: string | undefined;
    do {
      const page = await client.listTools(cursor ? { cursor } : {}, { timeout: timeoutMs });
      tools.push(...page.tools);
      cursor = page.nextCursor;
    } while (cursor && tools.length < 10_000);
    this.tools = tools;
    this.deps.changed(this.name);
  }

  /** A start that failed: shown as failed, tried again with a growing delay. */
  private failed(error: unknown): void {
    this.status.failures++;
    this.status.state = "failed";
    this.status.lastError = this.redact.text(errorMessage(error)).slice(0, 2_000);
    this.logger.warn("an MCP server could not be started", {
      server: this.name,
      error: this.status.lastError,
      failures: this.status.failures,
    });
    // Waiting for the owner's sign-in: tried again when it is made, not on a timer.
    if (this.stopped || this.status.signIn === "needed") return;
    const delay = Math.min(RETRY_BASE_MS * 2 ** (this.status.failures - 1), RETRY_MAX_MS);
    clearTimeout(this.retryTimer);
    this.retryTimer = setTimeout(() => this.startSoon(), delay);
    this.retryTimer.unref();
  }
}

/**
 * `~` and `~/…` in an argument or environment value name the server's own state directory (its
 * HOME, the one place it may write) as the sandbox shows it: `MEMORY_FILE_PATH = "~/memory.json"`.
 */
export function inHome(value: string, home: string): string {
  if (value === "~") return home;
  return value.startsWith("~/") ? `${home}${value.slice(1)}` : value;
}

/**
 * The folder under the server's `~/.npm/_npx/` holding a package that npx ran while some of its
 * dependencies are missing (Node's "Cannot find package/module … imported from …/_npx/<copy>/…").
 */
export function halfInstalledNpx(stderr: string): string | undefined {
  if (!/ERR_MODULE_NOT_FOUND|MODULE_NOT_FOUND|Cannot find (package|module)/.test(stderr)) return undefined;
  return /\/\.npm\/_npx\/([0-9a-f]{6,64})\/node_modules\//.exec(stderr)?.[1];
}

/** A start's state: a failed server stays failed while it is tried again, a crashed one restarts. */
function nextState(status: McpServerStatus): McpServerStatus["state"] {
  if (status.state === "failed") return "failed";
  return status.failures > 0 ? "restarting" : "starting";
}

function exitText(exit: ProcessExit): string {
  if (exit.spawnError) return `could not be started: ${exit.spawnError}`;
  return exit.signal ? `was killed by ${exit.signal}` : `exited with code ${exit.code}`;
}

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
import type { ElicitRequestFormParams, ServerCapabilities, Tool } from "@modelcontextprotocol/sdk/types.js";
import { KeptProcess, errorMessage, isMcpClientTool } from "@stavrobot/common";
import type { Logger, McpServerDeclaration, McpServerStatus } from "@stavrobot/common";
import type { RunProgress } from "../formats/format.js";
import type { Executor } from "../executor.js";
import type { NetworkPolicy } from "../network.js";
import type { RunOutcome } from "../chat-messages.js";
import { connectRemote, newClient } from "./connect.js";
import { CallsInFlight } from "./calls.js";
import { ResourceWatch } from "./subscriptions.js";
import type { OwnerQuestions } from "./elicitation.js";
import type { McpGrants } from "./grants.js";
import { ServerOAuth, isSignInFailure, usesOAuth } from "./oauth.js";
import type { OAuthStore } from "./oauth-store.js";
import { runClientTool } from "./features.js";
import { exitText, forgetHalfInstalledNpx, launchStdio } from "./launch.js";
import { Redactor } from "./redact.js";
import { callOutcome, outputMismatch } from "./result.js";
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

/** How long a server has after a cancellation to show it still answers (a ping) before it is restarted. */
const CANCEL_GRACE_MS = 2_000;
/** A server that ran this long without failing counts as well again. */
const HEALTHY_AFTER_MS = 30_000;
const RETRY_BASE_MS = 1_000;
const RETRY_MAX_MS = 60_000;

/**
 * One MCP server the owner declared. A stdio server is a kept process in the plugin sandbox
 * (launch.ts), restarted with a growing delay when it crashes or fails to start.
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
  private readonly calls: CallsInFlight;
  /** The resources the model read, followed where the server offers subscriptions. */
  private readonly watch = new ResourceWatch();

  constructor(
    readonly name: string,
    readonly declaration: McpServerDeclaration,
    private readonly deps: McpServerDeps,
  ) {
    this.redact = new Redactor([...Object.values(declaration.env), ...Object.values(declaration.headers)]);
    this.logger = this.redact.logger(deps.logger);
    this.calls = new CallsInFlight({
      server: name,
      questionTimeoutMs: this.questionTimeoutMs,
      redact: this.redact,
      logger: this.logger,
      ...(deps.questions ? { questions: deps.questions } : {}),
    });
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
      const result = await this.calls.timed(tool, timeoutMs, (signal) =>
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
      const declared = this.tools.find((candidate) => candidate.name === tool);
      const mismatch = await outputMismatch(`Tool "${tool}" of MCP server "${this.name}"`, declared, result);
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
      ? (params: ElicitRequestFormParams, signal: AbortSignal) => this.calls.ask(params, signal)
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
    this.status.state = nextState(this.status);
    const { child, roots } = await launchStdio(this, { ...this.deps, logger: this.logger });
    this.roots = roots;
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
      await forgetHalfInstalledNpx(this, child.stderrTail(), this.logger);
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
      } else if (!this.oauth && (isSignInFailure(error) || /\b401\b/.test(errorMessage(error)))) {
        // Signed in to by the owner's own headers: those are what it refused.
        const headers = Object.keys(this.declaration.headers);
        throw new Error(
          headers.length > 0
            ? `${errorMessage(error)}: the server refused the headers it was given (${headers.join(", ")}); check their values in [mcpServers.${this.name}.headers]`
            : errorMessage(error),
          { cause: error },
        );
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

/** A start's state: a failed server stays failed while it is tried again, a crashed one restarts. */
function nextState(status: McpServerStatus): McpServerStatus["state"] {
  if (status.state === "failed") return "failed";
  return status.failures > 0 ? "restarting" : "starting";
}

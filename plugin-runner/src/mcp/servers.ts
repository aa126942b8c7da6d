import { lstat, mkdir, readFile } from "node:fs/promises";
import { DomainError, formatZodError, mcpServersSchema } from "@stavrobot/common";
import type { McpServerDeclarations } from "@stavrobot/common";
import type { JsonSchema, Plugin, ToolDef } from "../formats/format.js";
import { flatParameters, FORMAT_TOOL_NAME, MAX_TOOLS_PER_PLUGIN } from "../formats/format.js";
import type { Isolation } from "../users.js";
import { clientTools } from "./features.js";
import { McpGrants } from "./grants.js";
import { OAuthStore } from "./oauth-store.js";
import type { McpServer, McpServerDeps } from "./server.js";

export interface McpServersOptions extends Omit<McpServerDeps, "changed" | "grants" | "oauth"> {
  /** Where remote servers' OAuth sign-ins are kept (the runner's state, mode 0600). */
  oauthFile?: string;
  /** A server no longer declared loses its user (its state directory stays, for when it returns). */
  isolation: Pick<Isolation, "removeUser">;
  /** The declarations the app wrote from config.toml (absent: no MCP servers). */
  file?: string;
  /** Told when a server's tools changed (the plugin store drops what it cached). */
  changed(name: string): void;
  /** Where the write access given to servers' users is recorded (the runner's state). */
  grantsFile?: string;
}

/** How much of a server's instructions its description carries. */
const MAX_INSTRUCTIONS_CHARS = 2_000;
/** How long a listing of one server waits for it to finish starting. */
const WAIT_MS = 20_000;
/** How often the declarations file is looked at for changes (besides every listing). */
const POLL_MS = 10_000;
const EMPTY_SCHEMA: JsonSchema = { type: "object", properties: {} };

/**
 * The owner's MCP servers, each a plugin of format "mcp": read from the declarations file the app
 * writes from config.toml (read again when it changes), started when the runner starts (see the
 * README for why), and stopped when it stops or a declaration is removed or changed. They are not
 * directories of the plugins folder: nothing the model does can add, change or remove one.
 */
export class McpServers {
  private servers = new Map<string, McpServer>();
  private stamp = "";
  private reading: Promise<void> | undefined;
  private started = false;
  private poll: NodeJS.Timeout | undefined;
  private readonly grants: McpGrants;
  private readonly oauth: OAuthStore;

  constructor(private readonly options: McpServersOptions) {
    this.grants = new McpGrants(options.grantsFile, options.logger);
    this.oauth = new OAuthStore(options.oauthFile, options.logger);
  }

  /**
   * A Connect from the owner's card: the authorization page to open, or signed in at once (a
   * refresh token that still works). 404 for no such server, 400 for one that does not sign in.
   */
  async signInStart(name: string, redirectUrl: string) {
    const server = await this.get(name);
    if (!server) throw new DomainError("not-found", `No MCP server "${name}" is declared.`);
    if (!server.oauth)
      throw new DomainError(
        "invalid",
        `MCP server "${name}" does not sign in with OAuth (a stdio server, or one given an Authorization header).`,
      );
    const { startSignIn } = await import("./oauth.js");
    const started = await startSignIn(this.oauthOptions(server), redirectUrl);
    if ("connected" in started) {
      server.signedIn();
      return { connected: true as const, message: `MCP server "${name}" is signed in.` };
    }
    return started;
  }

  /** The authorization server sent the owner back: the code is exchanged and the server connected. */
  async signInFinish(query: { state?: string; code?: string; error?: string; error_description?: string }) {
    await this.refresh();
    const { finishSignIn } = await import("./oauth.js");
    const name = await finishSignIn(
      this.oauth,
      (candidate) => {
        const server = this.servers.get(candidate);
        return server?.oauth ? this.oauthOptions(server) : undefined;
      },
      query,
    );
    this.servers.get(name)?.signedIn();
    return { name, message: `MCP server "${name}" is signed in.` };
  }

  private oauthOptions(server: McpServer) {
    return { name: server.name, declaration: server.declaration, store: this.oauth };
  }

  /** Reads the declarations and starts every enabled server (in the background). */
  async start(): Promise<void> {
    this.started = true;
    this.stamp = "";
    await this.refresh();
    // What servers declared before this start were given and are declared no more is taken back.
    await this.grants.revokeAllBut([...this.servers.keys()]).catch((error: unknown) =>
      this.options.logger.warn("could not take back old MCP servers' write access", {
        error: String(error),
      }),
    );
    // The app may write the file after the runner started (the container starts both at once).
    this.poll = setInterval(() => void this.refresh().catch(() => {}), POLL_MS);
    this.poll.unref();
  }

  /** The declared servers, by name (after reading the file again if it changed). */
  async all(): Promise<McpServer[]> {
    await this.refresh();
    return [...this.servers.values()];
  }

  /** Whether `name` is a declared server (without reading the file again). */
  has(name: string): boolean {
    return this.servers.has(name);
  }

  async get(name: string): Promise<McpServer | undefined> {
    await this.refresh();
    return this.servers.get(name);
  }

  /**
   * Its plugin. `wait` lets a server that is starting finish (for at most WAIT_MS) so its tools are
   * known; a failed one is not started again here (its retries keep their pace) and shows why.
   */
  async plugin(server: McpServer, wait: boolean): Promise<Plugin> {
    const { state } = server.status;
    if (wait && server.declaration.enabled && (state === "starting" || state === "restarting")) {
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([
        server.client().catch(() => {}),
        new Promise((resolve) => (timer = setTimeout(resolve, Math.min(server.timeoutMs, WAIT_MS)))),
      ]);
      clearTimeout(timer);
    }
    return pluginOf(server);
  }

  /** Starts a server again (its network setting changed). */
  async restart(name: string): Promise<void> {
    const server = this.servers.get(name);
    if (server) server.restart("the owner changed its network");
  }

  async stopAll(): Promise<void> {
    this.started = false;
    clearInterval(this.poll);
    const servers = [...this.servers.values()];
    this.servers = new Map();
    await Promise.all(servers.map((server) => server.stop()));
  }

  /** Servers that keep failing (for GET /health), with their last error (secrets removed). */
  failing(): { name: string; state: string; failures: number; lastError?: string; signIn?: "needed" }[] {
    return [...this.servers.values()]
      .filter(
        (server) =>
          server.status.state === "failed" ||
          server.status.failures >= 3 ||
          server.status.signIn === "needed",
      )
      .map((server) => ({
        name: server.name,
        state: server.status.state,
        failures: server.status.failures,
        ...(server.status.signIn === "needed" ? { signIn: "needed" as const } : {}),
        ...(server.status.lastError ? { lastError: server.status.lastError } : {}),
      }));
  }

  private refresh(): Promise<void> {
    this.reading ??= this.read().finally(() => (this.reading = undefined));
    return this.reading;
  }

  private async read(): Promise<void> {
    const { file, logger } = this.options;
    const info = file ? await lstat(file).catch(() => undefined) : undefined;
    const stamp = info ? `${info.mtimeMs}:${info.size}` : "none";
    if (stamp === this.stamp) return;
    this.stamp = stamp;
    let declared: McpServerDeclarations = {};
    if (file && info) {
      try {
        const parsed = mcpServersSchema.safeParse(JSON.parse(await readFile(file, "utf8")));
        if (parsed.success) declared = parsed.data;
        // Never the values: the file holds secrets.
        else
          logger.error("the MCP server declarations are not valid; none is started", {
            error: formatZodError(parsed.error),
          });
      } catch {
        logger.error("the MCP server declarations file is not JSON; none is started");
      }
    }
    const next = new Map<string, McpServer>();
    const stopping: McpServer[] = [];
    for (const [name, declaration] of Object.entries(declared)) {
      const current = this.servers.get(name);
      if (current && JSON.stringify(current.declaration) === JSON.stringify(declaration)) {
        next.set(name, current);
        continue;
      }
      if (current) stopping.push(current);
      // The MCP SDK is loaded only once a server is declared: a runner without one never carries it.
      const { McpServer } = await import("./server.js");
      next.set(
        name,
        new McpServer(name, declaration, {
          ...this.options,
          grants: this.grants,
          oauth: this.oauth,
          changed: this.options.changed,
        }),
      );
    }
    const gone = [...this.servers.values()].filter((server) => !next.has(server.name));
    stopping.push(...gone);
    this.servers = next;
    await Promise.all(stopping.map((server) => server.stop()));
    for (const server of gone) {
      this.options.changed(server.name);
      // Before its user goes: a later user with the same uid must inherit nothing.
      await this.grants.revoke(server.name).catch((error: unknown) =>
        logger.warn("could not take back an MCP server's write access", {
          server: server.name,
          error: String(error),
        }),
      );
      await this.options.isolation.removeUser(server.name).catch((error: unknown) =>
        logger.warn("could not remove the user of an MCP server no longer declared", {
          server: server.name,
          error: String(error),
        }),
      );
    }
    for (const server of next.values()) {
      this.options.changed(server.name);
      if (!this.started) continue;
      await mkdir(server.dir, { recursive: true, mode: 0o700 });
      server.startSoon();
    }
  }
}

/**
 * A server as a plugin: its tools as it lists them, named as it names them, then the client's own
 * tools for the features it offers (`resources/list`, `prompts/get`, …; features.ts).
 */
function pluginOf(server: McpServer): Plugin {
  const tools: ToolDef[] = [];
  const skipped: string[] = [];
  for (const tool of server.tools) {
    if (tools.length >= MAX_TOOLS_PER_PLUGIN) {
      skipped.push(`tool "${tool.name}" skipped: a plugin may have at most ${MAX_TOOLS_PER_PLUGIN} tools`);
    } else if (!FORMAT_TOOL_NAME.test(tool.name)) {
      skipped.push(
        `tool "${tool.name.slice(0, 80)}" skipped: its name must be at most 64 letters, digits, _, - or .`,
      );
    } else {
      const schema =
        tool.inputSchema && typeof tool.inputSchema === "object"
          ? server.redact.deep(tool.inputSchema as JsonSchema)
          : EMPTY_SCHEMA;
      tools.push({
        name: tool.name,
        description: server.redact.text(tool.description ?? tool.title ?? ""),
        async: false,
        parameters: flatParameters(schema),
        schema,
        dir: server.dir,
        entrypoint: server.dir,
        ...(tool.annotations?.readOnlyHint === true ? { readOnlyHint: true } : {}),
      });
    }
  }
  // The client's own tools (its resources and prompts), when its handshake offered them: a "/" in
  // their names, so no tool of the server's is ever one of them.
  const offered = clientTools(server.capabilities);
  for (const tool of offered)
    tools.push({
      name: tool.name,
      description: tool.description,
      async: false,
      parameters: flatParameters(tool.schema),
      schema: tool.schema,
      dir: server.dir,
      entrypoint: server.dir,
    });
  const { declaration } = server;
  // A server's instructions say how to use its tools (for the model, unlike a plugin's
  // instructions for the user): they follow its title or the owner's description, and `show`
  // gives them in full. Without them, its tools' names say what it does.
  const names = tools
    .filter((tool) => !tool.name.includes("/"))
    .map((tool) => tool.name)
    .join(", ");
  const title = `MCP server${server.serverTitle ? ` ${server.serverTitle}` : ""}`;
  const guide = server.instructions?.trim();
  // The model finds the client's own tools from the listing too, as it does the server's.
  const also = offered.length > 0 ? ` Also ${offered.map((tool) => tool.name).join(", ")}.` : "";
  const description =
    (guide
      ? `${declaration.description ?? `${title}.`} ${cap(guide, MAX_INSTRUCTIONS_CHARS)}`
      : (declaration.description ?? `${title}${names ? ` with ${cap(names, 300)}` : ""}.`)) + also;
  return {
    name: server.name,
    format: "mcp",
    description: server.redact.text(description),
    dir: server.dir,
    editable: false,
    tools,
    skipped,
    declared: declaration.network ? ["network"] : [],
    network: declaration.network,
    needsApproval: false,
    server: { ...server.status },
    // A call may wait for the owner's answers on top of its own time (elicitation.ts).
    runSeconds: declaration.timeoutSeconds + declaration.questionTimeoutSeconds,
  };
}

function cap(text: string, max: number): string {
  return text.length > max ? `${text.slice(0, max - 1)}…` : text;
}

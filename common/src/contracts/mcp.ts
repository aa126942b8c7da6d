import { z } from "zod";
import { PLUGIN_NAME_PATTERN } from "./plugin-runner.js";

/** A table of strings whose keys must match `pattern` (the error names the key, never a value). */
function namedRecord(pattern: RegExp, message: string) {
  return z
    .record(z.string(), z.string())
    .superRefine((table, ctx) => {
      for (const key of Object.keys(table))
        if (!pattern.test(key)) ctx.addIssue({ code: "custom", path: [key], message });
    })
    .default({});
}

/** A path on this machine: absolute, or `~`/`~/…` for the server's own state directory. */
const machinePath = z
  .string()
  .refine(
    (value) => value.startsWith("/") || value === "~" || value.startsWith("~/"),
    'must be an absolute path (or "~/…" for the server\'s own state directory)',
  );

/** How a server is reached, as other assistants' configs spell it (`http` is Streamable HTTP). */
export const MCP_TRANSPORT_TYPES = ["stdio", "http", "streamable-http", "sse"] as const;

/** The longest the owner may take to answer a server's questions during one call. */
export const MAX_QUESTION_TIMEOUT_SECONDS = 900;

/** The longest a first start (an `npx -y` download included) may take. */
export const MAX_START_TIMEOUT_SECONDS = 600;

/**
 * One MCP server the owner declares in config.toml as `[mcpServers.<name>]`: a stdio server
 * (`command`, `args`, `env`, `cwd`) run in the plugin sandbox, or a remote one (`url`, `headers`)
 * spoken to over Streamable HTTP or HTTP+SSE (`type` says which; without it, Streamable HTTP with
 * a fall-back to HTTP+SSE). The app checks it when it reads config.toml and hands the runner
 * exactly this (see the runner's README); `env` and `headers` values are secrets.
 */
export const mcpServerSchema = z
  .strictObject({
    type: z.enum(MCP_TRANSPORT_TYPES).optional(),
    command: z.string().min(1).optional(),
    args: z.array(z.string()).default([]),
    env: namedRecord(/^[A-Za-z_][A-Za-z0-9_]*$/, "must be an environment variable name (letters, digits, _)"),
    /** The server's working directory (default its state directory); a named path, so it is shown. */
    cwd: machinePath.optional(),
    /** Every path it names is shown read-only (default: writable, code trees aside). */
    readOnly: z.boolean().default(false),
    /** Paths shown read-only whatever else is named (and shown even when nothing else names them). */
    readOnlyPaths: z.array(machinePath).default([]),
    url: z
      .url()
      .refine((value) => /^https?:\/\//.test(value), "must be an http:// or https:// URL")
      .optional(),
    headers: namedRecord(/^[A-Za-z0-9!#$%&'*+.^_`|~-]+$/, "must be an HTTP header name"),
    /**
     * OAuth 2.1 for a remote server without an `Authorization` header (the runner signs in when the
     * owner presses Connect): a client registered by hand (`clientId`, `clientSecret`, a secret)
     * where the authorization server offers no dynamic registration, and the `scope` to ask for.
     */
    oauth: z
      .strictObject({
        clientId: z.string().min(1).optional(),
        clientSecret: z.string().min(1).optional(),
        scope: z.string().min(1).optional(),
      })
      .optional(),
    /** Shown to the model beside the server's name; default the server's own instructions or name. */
    description: z.string().max(1000).optional(),
    network: z.boolean().default(true),
    timeoutSeconds: z
      .number()
      .positive()
      .max(80, "must be at most 80: the agent waits 90 s for a tool")
      .default(60),
    /**
     * How long the owner has to answer the server's questions (elicitation) during one call; that
     * wait does not count against `timeoutSeconds`, and a question not answered in time is cancelled.
     */
    questionTimeoutSeconds: z.number().positive().max(MAX_QUESTION_TIMEOUT_SECONDS).default(300),
    /** How long a start (and its handshake) may take: an `npx -y` first start downloads the package. */
    startTimeoutSeconds: z.number().positive().max(MAX_START_TIMEOUT_SECONDS).default(120),
    enabled: z.boolean().default(true),
  })
  .superRefine((server, ctx) => {
    const remote = server.type !== undefined && server.type !== "stdio";
    if (server.type === "stdio" && !server.command) {
      ctx.addIssue({ code: "custom", path: ["command"], message: 'type = "stdio" needs command' });
      return;
    }
    if (remote && !server.url) {
      ctx.addIssue({ code: "custom", path: ["url"], message: `type = "${server.type}" needs url` });
      return;
    }
    if (!server.command === !server.url) {
      ctx.addIssue({
        code: "custom",
        path: [],
        message: "set either command (a stdio server) or url (a remote server)",
      });
      return;
    }
    if (server.url) {
      if (server.type === "stdio")
        ctx.addIssue({ code: "custom", path: ["type"], message: 'a server with url is not "stdio"' });
      for (const key of ["args", "env", "readOnlyPaths"] as const) {
        if (Object.keys(server[key]).length > 0)
          ctx.addIssue({ code: "custom", path: [key], message: "only for a stdio server (with command)" });
      }
      if (server.cwd !== undefined)
        ctx.addIssue({ code: "custom", path: ["cwd"], message: "only for a stdio server (with command)" });
      if (!server.network)
        ctx.addIssue({
          code: "custom",
          path: ["network"],
          message: "a remote server is reached over the network: remove network = false or the server",
        });
      if (server.oauth?.clientSecret && !server.oauth.clientId)
        ctx.addIssue({ code: "custom", path: ["oauth", "clientSecret"], message: "needs oauth.clientId" });
      if (server.oauth && Object.keys(server.headers).some((key) => key.toLowerCase() === "authorization"))
        ctx.addIssue({
          code: "custom",
          path: ["oauth"],
          message: "not with an Authorization header, which is the sign-in itself: keep one of the two",
        });
    } else {
      if (Object.keys(server.headers).length > 0)
        ctx.addIssue({ code: "custom", path: ["headers"], message: "only for a remote server (with url)" });
      if (server.oauth)
        ctx.addIssue({ code: "custom", path: ["oauth"], message: "only for a remote server (with url)" });
    }
  });
export type McpServerDeclaration = z.infer<typeof mcpServerSchema>;

/** What other assistants accept as a server's name: letters, digits, `-` and `_`. */
export const MCP_SERVER_NAME_PATTERN = /^[A-Za-z0-9_-]+$/;

/**
 * The plugin a declared server becomes: its name in lower case with `_` as `-` (`my_server` is
 * plugin `my-server`), so it is a plugin name like any other (its Unix user, the model's
 * `run_plugin_tool`, the Plugins page). A plugin name is its own plugin name.
 */
export function mcpPluginName(declared: string): string {
  return declared.toLowerCase().replaceAll("_", "-");
}

/**
 * Every declared server, by the plugin name it becomes: names are plugin names (they share the
 * plugins' namespace), written as other assistants' configs write them (`my_server`, `GitHub`).
 * Two names that become one plugin name are refused.
 */
export const mcpServersSchema = z
  .record(z.string(), mcpServerSchema)
  .superRefine((servers, ctx) => {
    const seen = new Map<string, string>();
    for (const name of Object.keys(servers)) {
      const plugin = mcpPluginName(name);
      if (!MCP_SERVER_NAME_PATTERN.test(name) || !PLUGIN_NAME_PATTERN.test(plugin) || name.length > 64) {
        ctx.addIssue({
          code: "custom",
          path: [name],
          message: "an MCP server's name must be at most 64 letters, digits, hyphens and underscores",
        });
        continue;
      }
      const other = seen.get(plugin);
      if (other !== undefined)
        ctx.addIssue({
          code: "custom",
          path: [name],
          message: `"${name}" and "${other}" are both the plugin "${plugin}": rename one`,
        });
      seen.set(plugin, name);
    }
  })
  .transform((servers) =>
    Object.fromEntries(Object.entries(servers).map(([name, server]) => [mcpPluginName(name), server])),
  );
export type McpServerDeclarations = z.infer<typeof mcpServersSchema>;

/** The file the app writes for the runner: next to the internal secret, readable by the owner only. */
export const MCP_SERVERS_FILE = "mcp-servers.json";

/**
 * The MCP client's own tools, offered beside a server's tools on the plugin of every server that
 * declares the feature: its resources listed and read, its prompts listed and fetched. A `/` is in
 * no plugin tool's name of any format (nor in a server's tool the runner shows), so these names
 * always mean these tools; each of them only reads.
 */
export const MCP_CLIENT_TOOLS = [
  "resources/list",
  "resources/templates/list",
  "resources/read",
  "prompts/list",
  "prompts/get",
] as const;
export type McpClientTool = (typeof MCP_CLIENT_TOOLS)[number];

export function isMcpClientTool(name: unknown): name is McpClientTool {
  return typeof name === "string" && (MCP_CLIENT_TOOLS as readonly string[]).includes(name);
}

/** `POST /mcp/oauth/start` (owner only): where the owner's browser goes to sign a server in. */
export const mcpOAuthStartRequestSchema = z.object({
  name: z.string().min(1).max(64),
  /** The app's route the authorization server sends the browser back to. */
  redirectUrl: z.url().refine((value) => /^https?:\/\//.test(value), "must be an http(s) URL"),
});
export const mcpOAuthStartResponseSchema = z.union([
  z.object({ authorizationUrl: z.string() }),
  z.object({ connected: z.literal(true), message: z.string() }),
]);

/** `POST /mcp/oauth/finish` (owner only): the query the authorization server sent back. */
export const mcpOAuthFinishRequestSchema = z.object({
  state: z.string().max(512).optional(),
  code: z.string().max(4096).optional(),
  error: z.string().max(512).optional(),
  error_description: z.string().max(2048).optional(),
});
export const mcpOAuthFinishResponseSchema = z.object({ name: z.string(), message: z.string() });

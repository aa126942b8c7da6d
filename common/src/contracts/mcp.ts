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

/**
 * One MCP server the owner declares in config.toml as `[mcpServers.<name>]`: a stdio server
 * (`command`, `args`, `env`) run in the plugin sandbox, or a remote one (`url`, `headers`) spoken to
 * over Streamable HTTP (falling back to HTTP+SSE). The app checks it when it reads config.toml and
 * hands the runner exactly this (see the runner's README); `env` and `headers` values are secrets.
 */
export const mcpServerSchema = z
  .strictObject({
    command: z.string().min(1).optional(),
    args: z.array(z.string()).default([]),
    env: namedRecord(/^[A-Za-z_][A-Za-z0-9_]*$/, "must be an environment variable name (letters, digits, _)"),
    url: z
      .url()
      .refine((value) => /^https?:\/\//.test(value), "must be an http:// or https:// URL")
      .optional(),
    headers: namedRecord(/^[A-Za-z0-9!#$%&'*+.^_`|~-]+$/, "must be an HTTP header name"),
    /** Shown to the model beside the server's name; default the server's own instructions or name. */
    description: z.string().max(1000).optional(),
    network: z.boolean().default(true),
    timeoutSeconds: z
      .number()
      .positive()
      .max(80, "must be at most 80: the agent waits 90 s for a tool")
      .default(60),
    enabled: z.boolean().default(true),
  })
  .superRefine((server, ctx) => {
    if (!server.command === !server.url) {
      ctx.addIssue({
        code: "custom",
        path: [],
        message: "set either command (a stdio server) or url (a remote server)",
      });
      return;
    }
    if (server.url) {
      for (const key of ["args", "env"] as const) {
        if (Object.keys(server[key]).length > 0)
          ctx.addIssue({ code: "custom", path: [key], message: "only for a stdio server (with command)" });
      }
      if (!server.network)
        ctx.addIssue({
          code: "custom",
          path: ["network"],
          message: "a remote server is reached over the network: remove network = false or the server",
        });
    } else if (Object.keys(server.headers).length > 0) {
      ctx.addIssue({ code: "custom", path: ["headers"], message: "only for a remote server (with url)" });
    }
  });
export type McpServerDeclaration = z.infer<typeof mcpServerSchema>;

/** Every declared server by name; names are plugin names (they share the plugins' namespace). */
export const mcpServersSchema = z.record(z.string(), mcpServerSchema).superRefine((servers, ctx) => {
  for (const name of Object.keys(servers)) {
    if (!PLUGIN_NAME_PATTERN.test(name) || name.length > 64)
      ctx.addIssue({
        code: "custom",
        path: [name],
        message: "an MCP server's name is its plugin name: at most 64 lowercase letters, digits and hyphens",
      });
  }
});
export type McpServerDeclarations = z.infer<typeof mcpServersSchema>;

/** The file the app writes for the runner: next to the internal secret, readable by the owner only. */
export const MCP_SERVERS_FILE = "mcp-servers.json";

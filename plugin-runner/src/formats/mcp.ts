import type { McpServers } from "../mcp/servers.js";
import type { DeclaredPlugins, Plugin, PluginFormat } from "./format.js";

/**
 * MCP servers as a plugin format. They are not directories: the owner declares them in
 * config.toml and `McpServers` keeps them (see mcp/), so this format recognises no directory and
 * only runs tools and stops servers. A tool runs within the server's own `timeoutSeconds`.
 */
export function mcpFormat(servers: McpServers): PluginFormat {
  return {
    id: "mcp",
    recognise: async () => false,
    load: async () => {
      throw new Error("MCP servers are declared by the owner in config.toml, not installed");
    },
    run: async (plugin, tool, params, _timeoutMs, onProgress) => {
      const server = await servers.get(plugin.name);
      if (!server) return { success: false, error: `MCP server "${plugin.name}" is no longer declared.` };
      return server.call(tool.name, params.values, server.timeoutMs, onProgress);
    },
    // The owner switched its network: it starts again with the new setting.
    stop: (plugin) => servers.restart(plugin),
    stopAll: () => servers.stopAll(),
  };
}

/**
 * The owner's MCP servers as the registry's declared plugins: listed as they are now, and a server
 * asked for by name is given the time to finish starting, so its tools are known.
 */
export function mcpDeclaredPlugins(servers: McpServers): DeclaredPlugins {
  return {
    list: async () => {
      const plugins: Plugin[] = [];
      for (const server of await servers.all()) plugins.push(await servers.plugin(server, false));
      return plugins;
    },
    has: (name) => servers.has(name),
    declares: async (name) => (await servers.get(name)) !== undefined,
    get: async (name) => {
      const server = await servers.get(name);
      return server ? servers.plugin(server, true) : undefined;
    },
  };
}

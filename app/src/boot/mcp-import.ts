import { z } from "zod";
import type { MCP_TRANSPORT_TYPES } from "@stavrobot/common";
import {
  MCP_SERVER_NAME_PATTERN,
  formatZodError,
  mcpPluginName,
  mcpServerSchema,
  parseTomlConfig,
} from "@stavrobot/common";
import { expandMcpVariables } from "./mcp-variables.js";

/**
 * Other assistants' MCP server declarations (Claude Desktop's `claude_desktop_config.json`, a
 * project's `.mcp.json`, Claude Code's `~/.claude.json`: `{"mcpServers": {...}}`; VS Code's
 * `{"servers": {...}}`) as config.toml's `[mcpServers.<name>]` tables. What has no equivalent
 * here is refused with the reason, per server; the others are still taken.
 */

export interface Imported {
  name: string;
  /** The TOML tables of this server. */
  toml: string;
  /** What was left out or changed, in words (an approval list, Windows' `cmd /c`). */
  notes: string[];
}

export interface ImportPlan {
  imported: Imported[];
  refused: { name: string; reason: string }[];
}

/** Keys other hosts write that change nothing of what a server does here: left out, saying so. */
const LEFT_OUT: Record<string, string> = {
  autoApprove:
    "its list of tools approved without asking has no equivalent (every tool runs; the Plugins page sets each one's permission)",
  alwaysAllow:
    "its list of tools always allowed has no equivalent (every tool runs; the Plugins page sets each one's permission)",
};
const TYPES: Record<string, (typeof MCP_TRANSPORT_TYPES)[number]> = {
  stdio: "stdio",
  http: "http",
  sse: "sse",
  "streamable-http": "streamable-http",
  streamableHttp: "streamable-http",
  streamable_http: "streamable-http",
};

/**
 * The servers of a parsed JSON file: each one mapped, or refused with the reason. `declared`: the
 * plugin names config.toml declares already (refused unless `replace`).
 */
export function planImport(json: unknown, declared: ReadonlySet<string>, replace: boolean): ImportPlan {
  const table = serversOf(json);
  const plan: ImportPlan = { imported: [], refused: [] };
  const taken = new Map<string, string>();
  for (const [name, entry] of Object.entries(table)) {
    const refuse = (reason: string) => void plan.refused.push({ name, reason });
    if (!MCP_SERVER_NAME_PATTERN.test(name) || name.length > 64) {
      refuse(
        "its name must be at most 64 letters, digits, hyphens and underscores here: rename it in the file",
      );
      continue;
    }
    const plugin = mcpPluginName(name);
    const twin = taken.get(plugin);
    if (twin !== undefined) {
      refuse(`it and "${twin}" would both be the plugin "${plugin}": rename one in the file`);
      continue;
    }
    if (declared.has(plugin) && !replace) {
      refuse(`config.toml declares "${plugin}" already: run again with --replace to replace it`);
      continue;
    }
    const mapped = mapServer(entry);
    if ("reason" in mapped) {
      refuse(mapped.reason);
      continue;
    }
    // Checked as the app will read it (a variable this shell lacks has a stand-in).
    const expanded = expandMcpVariables({ mcpServers: { [name]: mapped.server } }, {}, "stand-in");
    const check = mcpServerSchema.safeParse(
      "value" in expanded ? (expanded.value as { mcpServers: Record<string, unknown> }).mcpServers[name] : {},
    );
    if (!check.success) {
      refuse(`it would not be a valid declaration here: ${formatZodError(check.error)}`);
      continue;
    }
    taken.set(plugin, name);
    plan.imported.push({ name, toml: tomlTables(name, mapped.server), notes: mapped.notes });
  }
  return plan;
}

/** `{"mcpServers": …}` or VS Code's `{"servers": …}`; a file with neither is refused whole. */
function serversOf(json: unknown): Record<string, unknown> {
  if (isObject(json)) {
    for (const key of ["mcpServers", "servers"]) {
      const table = json[key];
      if (isObject(table)) return table;
    }
  }
  throw new Error(
    'the file has no "mcpServers" (Claude Desktop, .mcp.json, Claude Code) or "servers" (VS Code) object',
  );
}

function mapServer(
  entry: unknown,
): { server: Record<string, unknown>; notes: string[] } | { reason: string } {
  if (!isObject(entry)) return { reason: "its entry is not an object" };
  const server: Record<string, unknown> = {};
  const notes: string[] = [];
  for (const [key, value] of Object.entries(entry)) {
    switch (key) {
      case "command":
      case "url":
      case "cwd":
      case "description":
        if (typeof value !== "string") return { reason: `"${key}" is not text` };
        server[key] = value;
        break;
      case "args":
        if (!Array.isArray(value) || !value.every((item) => typeof item === "string"))
          return { reason: '"args" is not a list of text' };
        server.args = value;
        break;
      case "env":
      case "headers": {
        if (!isObject(value)) return { reason: `"${key}" is not an object` };
        const bad = Object.keys(value).find((name) => typeof value[name] !== "string");
        if (bad !== undefined) return { reason: `"${key}.${bad}" is not text` };
        if (Object.keys(value).length > 0) server[key] = value;
        break;
      }
      case "type":
      case "transport":
      case "transportType": {
        const type = typeof value === "string" ? TYPES[value] : undefined;
        if (!type)
          return { reason: `"${key}" ${JSON.stringify(value)} is not a transport this assistant speaks` };
        server.type = type;
        break;
      }
      case "disabled":
        if (typeof value !== "boolean") return { reason: '"disabled" is not true or false' };
        if (value) server.enabled = false;
        break;
      case "timeout":
        if (typeof value !== "number" || value <= 0 || value > 80)
          return { reason: '"timeout" must be 1 to 80 seconds here (a call may take at most 80 s)' };
        server.timeoutSeconds = value;
        break;
      default:
        if (key in LEFT_OUT) notes.push(`"${key}" left out: ${LEFT_OUT[key]}`);
        else return { reason: `"${key}" has no equivalent here` };
    }
  }
  // Windows' shell in front of the command (`cmd /c npx …`): the command itself runs here.
  const args = server.args as string[] | undefined;
  if (
    typeof server.command === "string" &&
    /^cmd(\.exe)?$/i.test(server.command) &&
    args?.[0]?.toLowerCase() === "/c"
  ) {
    const [, command, ...rest] = args;
    if (!command) return { reason: '"cmd /c" runs nothing' };
    server.command = command;
    server.args = rest;
    notes.push(`"cmd /c" (Windows' shell) left out: ${command} runs directly`);
  }
  if (server.args !== undefined && (server.args as string[]).length === 0) delete server.args;
  return { server, notes };
}

/** The server's `[mcpServers.<name>]` table, its `env` and `headers` tables after it. */
function tomlTables(name: string, server: Record<string, unknown>): string {
  const { env, headers, ...plain } = server;
  const order = ["type", "command", "args", "cwd", "url", "description", "timeoutSeconds", "enabled"];
  const lines = [`[mcpServers.${name}]`];
  for (const key of order) if (plain[key] !== undefined) lines.push(`${key} = ${tomlValue(plain[key])}`);
  for (const [table, values] of [
    ["env", env],
    ["headers", headers],
  ] as const) {
    if (!isObject(values)) continue;
    lines.push(`[mcpServers.${name}.${table}]`);
    for (const [key, value] of Object.entries(values)) lines.push(`${tomlKey(key)} = ${tomlValue(value)}`);
  }
  return lines.join("\n") + "\n";
}

function tomlValue(value: unknown): string {
  // A TOML basic string takes JSON's escapes; lists and numbers are written the same way.
  if (typeof value === "string") return JSON.stringify(value).replace(/\u007f/g, "\\u007f");
  if (Array.isArray(value)) return `[${value.map(tomlValue).join(", ")}]`;
  return String(value);
}

function tomlKey(key: string): string {
  return /^[A-Za-z0-9_-]+$/.test(key) ? key : tomlValue(key);
}

/**
 * config.toml's text with the imported servers' tables at its end (comments, other keys and their
 * order kept), those it replaces taken out first. A server to replace that is not written as
 * `[mcpServers.<name>]` tables (an inline table) cannot be found here: that is an error.
 */
export function withImported(text: string, imported: readonly Imported[], source: string): string {
  const existing = declaredServers(text);
  let lines = text.split("\n");
  for (const server of imported) {
    const plugin = mcpPluginName(server.name);
    const names = [...existing.keys()].filter((name) => mcpPluginName(name) === plugin);
    for (const name of names) {
      const next = withoutServer(lines, name);
      if (!next)
        throw new Error(
          `[mcpServers.${name}] is not written as a table of its own in config.toml: remove it by hand, then import again`,
        );
      lines = next;
    }
  }
  const kept = lines.join("\n").replace(/\n*$/, "\n");
  const added = imported.map((server) => server.toml).join("\n");
  return `${kept}\n# Imported from ${source} by npm run mcp:import.\n${added}`;
}

/** The server names config.toml declares (its TOML read; not checked). */
export function declaredServers(text: string): Map<string, unknown> {
  const parsed = parseTomlConfig(text, z.record(z.string(), z.unknown()), "config.toml");
  return new Map(isObject(parsed.mcpServers) ? Object.entries(parsed.mcpServers) : []);
}

/** The lines without `[mcpServers.<name>]` and its sub-tables, or undefined when it has none. */
function withoutServer(lines: string[], name: string): string[] | undefined {
  const escaped = name.replace(/[.*+?^${}()|[\]\\-]/g, "\\$&");
  const own = new RegExp(
    `^\\s*\\[\\s*mcpServers\\s*\\.\\s*("${escaped}"|'${escaped}'|${escaped})\\s*(\\.[^\\]]*)?\\]`,
  );
  const header = /^\s*\[/;
  const out: string[] = [];
  let found = false;
  let skipping = false;
  for (const line of lines) {
    if (header.test(line)) skipping = own.test(line);
    if (skipping) found = true;
    else out.push(line);
  }
  return found ? out : undefined;
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/**
 * `${VAR}` and `${VAR:-default}` in an MCP server's declaration, as other assistants' configs write
 * them (`Authorization = "Bearer ${GITHUB_TOKEN}"`): expanded from the app's environment when it
 * reads config.toml, so the file the runner gets holds the values. `$${` is a literal `${`.
 * Expanded: `command`, `args`, `env` and `headers` values, `url`, `cwd`, `readOnlyPaths` and
 * `oauth`'s `clientId`, `clientSecret` and `scope`.
 */

/** How a variable the environment lacks (and that has no default) is treated. */
export type MissingVariables =
  /** A problem naming the server, the key and the variable: the app does not start on it. */
  | "refuse"
  /**
   * A stand-in value, so the rest can be checked (config.toml written by the Settings page or
   * `mcp:import`, in a shell that need not have the app's variables).
   */
  | "stand-in";

const VARIABLE = /\$\$\{|\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}/g;
/** What a missing variable becomes in "stand-in" mode (a URL's host where a URL is expected). */
const STAND_IN = "variable.invalid";

/**
 * The raw TOML with `[mcpServers]`' variables expanded, or the problems: one per missing
 * variable, naming the key (`mcpServers.github.env.GITHUB_TOKEN`) and the variable.
 */
export function expandMcpVariables(
  raw: unknown,
  env: NodeJS.ProcessEnv,
  missing: MissingVariables = "refuse",
): { value: unknown } | { problems: string[] } {
  if (!isTable(raw) || !isTable(raw.mcpServers)) return { value: raw };
  const problems: string[] = [];
  const servers: Record<string, unknown> = {};
  for (const [name, declared] of Object.entries(raw.mcpServers)) {
    if (!isTable(declared)) {
      servers[name] = declared;
      continue;
    }
    const server: Record<string, unknown> = { ...declared };
    const at = (key: string) => `mcpServers.${name}.${key}`;
    const one = (value: unknown, key: string, url = false): unknown =>
      typeof value === "string" ? expand(value, at(key), env, missing, problems, url) : value;
    for (const key of ["command", "cwd"]) if (key in server) server[key] = one(server[key], key);
    if ("url" in server) server.url = one(server.url, "url", true);
    for (const key of ["args", "readOnlyPaths"]) {
      const list = server[key];
      if (Array.isArray(list)) server[key] = list.map((item, index) => one(item, `${key}[${index}]`));
    }
    for (const key of ["env", "headers", "oauth"]) {
      const table = server[key];
      if (isTable(table))
        server[key] = Object.fromEntries(
          Object.entries(table).map(([entry, value]) => [entry, one(value, `${key}.${entry}`)]),
        );
    }
    servers[name] = server;
  }
  return problems.length > 0 ? { problems } : { value: { ...raw, mcpServers: servers } };
}

function expand(
  text: string,
  key: string,
  env: NodeJS.ProcessEnv,
  missing: MissingVariables,
  problems: string[],
  url: boolean,
): string {
  return text.replace(VARIABLE, (match, name: string | undefined, fallback: string | undefined, offset) => {
    if (name === undefined) return "${";
    const value = env[name];
    // As the shell's `:-`: the default also stands for a variable set to nothing.
    if (fallback !== undefined && !value) return fallback;
    if (value !== undefined) return value;
    if (missing === "stand-in") return url && offset === 0 ? `http://${STAND_IN}` : STAND_IN;
    problems.push(
      `key "${key}" uses \${${name}}, but ${name} is not set in the app's environment: set it before ` +
        `the app starts, or give a default (\${${name}:-…})`,
    );
    return match;
  });
}

function isTable(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

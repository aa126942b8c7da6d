/**
 * `npm run mcp:import -- <file> [--replace]`: the MCP servers of another assistant's JSON config
 * (Claude Desktop's `claude_desktop_config.json`, a project's `.mcp.json`, VS Code's `mcp.json`)
 * written into config.toml as `[mcpServers.<name>]` tables, the file's comments and other keys
 * kept. A server config.toml declares already is refused unless `--replace`; one that cannot be
 * mapped is refused with the reason, and the others are still written. A running assistant takes
 * them at once (it reads `[mcpServers]` again whenever config.toml changes). Exit code 0 when
 * every server was written, 1 when some or all were refused or nothing could be written, 2 for a
 * wrong command line.
 */
import { existsSync, readFileSync } from "node:fs";
import { basename } from "node:path";
import { errorMessage, mcpPluginName } from "@stavrobot/common";
import { writeConfigFile } from "./config-edit.js";
import { parseAppEnv } from "./env.js";
import { declaredServers, planImport, withImported } from "./mcp-import.js";
import { resolvePaths } from "./paths.js";

const USAGE = "usage: npm run mcp:import -- <claude_desktop_config.json | .mcp.json> [--replace]";

function main(argv: string[]): number {
  const replace = argv.includes("--replace");
  const files = argv.filter((arg) => arg !== "--replace");
  const unknown = files.find((arg) => arg.startsWith("-"));
  if (files.length !== 1 || unknown) {
    console.error(unknown ? `unknown option ${unknown}\n${USAGE}` : USAGE);
    return 2;
  }
  const source = files[0] as string;
  const paths = resolvePaths(parseAppEnv(process.env));
  if (!existsSync(paths.configPath)) {
    console.error(
      `No config.toml at ${paths.configPath}: start the assistant once (npm start), then import.`,
    );
    return 1;
  }
  let json: unknown;
  try {
    json = JSON.parse(readFileSync(source, "utf8"));
  } catch (error) {
    console.error(`Cannot read ${source} as JSON: ${errorMessage(error)}`);
    return 1;
  }
  try {
    const text = readFileSync(paths.configPath, "utf8");
    const declared = new Set([...declaredServers(text).keys()].map(mcpPluginName));
    const plan = planImport(json, declared, replace);
    for (const { name, reason } of plan.refused) console.log(`Refused ${name}: ${reason}`);
    if (plan.imported.length === 0) {
      console.log(`Nothing written to ${paths.configPath}.`);
      return 1;
    }
    writeConfigFile(paths.configPath, withImported(text, plan.imported, basename(source)));
    console.log(`Wrote to ${paths.configPath}:\n`);
    for (const server of plan.imported) {
      console.log(server.toml);
      for (const note of server.notes) console.log(`# ${note}`);
      const variables = [...server.toml.matchAll(/\$\{([A-Za-z_][A-Za-z0-9_]*)\}/g)].map((match) => match[1]);
      for (const name of new Set(variables))
        console.log(`# uses \${${name}}: it must be set in the assistant's environment when it starts`);
    }
    console.log("A running assistant starts them now; the Plugins page shows each one's state.");
    return plan.refused.length > 0 ? 1 : 0;
  } catch (error) {
    console.error(`config.toml was not changed: ${errorMessage(error)}`);
    return 1;
  }
}

process.exitCode = main(process.argv.slice(2));

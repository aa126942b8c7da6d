"use strict";
// The host of one Workbench plugin, run by the plugin-runner in the plugin's sandbox as the plugin's
// user: it gives the plugin's `register(api)` the API Workbench gives it (`registerTool`,
// `getPluginsDir`, `reloadPlugins`) and runs its tools when asked. It speaks JSON, one object per
// line, on the stdout it had at start; whatever the plugin itself prints goes to stderr.
//   in:  {id, op: "load"} | {id, op: "run", tool, input}
//   out: {id, ok: true, tools, skipped} | {id, ok: true, result} | {id, ok: false, error}
//        {event: "tools", tools, skipped} after the plugin called reloadPlugins()
const path = require("node:path");
const readline = require("node:readline");

const protocol = process.stdout.write.bind(process.stdout);
process.stdout.write = (chunk, encoding, callback) => process.stderr.write(chunk, encoding, callback);
for (const level of ["log", "info", "debug"]) console[level] = (...args) => console.error(...args);
process.on("uncaughtException", (error) => process.stderr.write(`uncaught: ${error && error.stack}\n`));
process.on("unhandledRejection", (error) => process.stderr.write(`unhandled: ${error && error.stack}\n`));

const pluginDir = process.env.WORKBENCH_PLUGIN_DIR;
let tools = new Map();
let skipped = [];

/** Answers larger than this are refused here: the runner reads lines of at most 8 MB. */
const MAX_ANSWER_CHARS = 6 * 1024 * 1024;

function send(message) {
  let line = JSON.stringify(message);
  if (line.length > MAX_ANSWER_CHARS && message.id !== undefined) {
    const megabytes = Math.round(line.length / 1024 / 1024);
    line = JSON.stringify({
      id: message.id,
      ok: false,
      error: `The tool's result is too large (${megabytes} MB).`,
    });
  }
  protocol(line + "\n");
}

function describeTools() {
  return [...tools.values()].map((tool) => ({
    name: tool.name,
    description: typeof tool.description === "string" ? tool.description : "",
    inputSchema: plain(tool.inputSchema),
  }));
}

/** A value as JSON can carry it (a schema built with functions or cycles is dropped). */
function plain(value) {
  try {
    return value === undefined ? undefined : JSON.parse(JSON.stringify(value));
  } catch {
    return undefined;
  }
}

async function load() {
  for (const key of Object.keys(require.cache)) {
    if (key.startsWith(pluginDir + path.sep)) delete require.cache[key];
  }
  const fresh = new Map();
  const problems = [];
  const api = {
    registerTool(tool) {
      if (!tool || typeof tool.name !== "string" || tool.name.length === 0) {
        problems.push("a tool without a name was not registered");
      } else if (typeof tool.run !== "function") {
        problems.push(`tool "${tool.name}" has no run() and was not registered`);
      } else {
        fresh.set(tool.name, tool);
      }
    },
    getPluginsDir: () => path.dirname(pluginDir),
    reloadPlugins() {
      setImmediate(async () => {
        try {
          await load();
          send({ event: "tools", tools: describeTools(), skipped });
        } catch (error) {
          process.stderr.write(`reload failed: ${error && error.stack}\n`);
        }
      });
    },
  };
  const plugin = require(path.join(pluginDir, "index.js"));
  const register =
    plugin && typeof plugin.register === "function"
      ? plugin.register
      : plugin && plugin.default && typeof plugin.default.register === "function"
        ? plugin.default.register
        : undefined;
  if (!register) throw new Error("index.js does not export a register(api) function");
  await register(api);
  tools = fresh;
  skipped = problems;
}

/** What run() returned, as JSON can carry it: undefined is marked, cycles and BigInts become text. */
function result(value) {
  if (value === undefined) return { undefined: true };
  try {
    return { result: JSON.parse(JSON.stringify(value)) };
  } catch {
    return { result: String(value) };
  }
}

async function handle(message) {
  try {
    if (message.op === "load") {
      await load();
      return { id: message.id, ok: true, tools: describeTools(), skipped };
    }
    if (message.op === "run") {
      const tool = tools.get(message.tool);
      if (!tool) return { id: message.id, ok: false, error: `Tool not found: ${message.tool}` };
      return { id: message.id, ok: true, ...result(await tool.run(message.input ?? {})) };
    }
    return { id: message.id, ok: false, error: `unknown op ${message.op}` };
  } catch (error) {
    const text = error instanceof Error ? error.message : String(error);
    return { id: message.id, ok: false, error: text, thrown: true };
  }
}

readline.createInterface({ input: process.stdin }).on("line", (line) => {
  let message;
  try {
    message = JSON.parse(line);
  } catch {
    return;
  }
  handle(message).then(send);
});

import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { git } from "./helpers.js";

/**
 * Plugins of the other formats, written (and compiled) at test time, as their authors would publish
 * them: a Cyclop One plugin whose tools are a shell script, Python, Node and a C program, with the
 * documented top-level entrypoint and the newer per-tool ones; Workbench plugins in a folder of a
 * larger repository. Each is a git repository a test serves over `git daemon`.
 */

/** Writes `files` (path → content; a leading `!` on the content marks it executable). */
export function writeFiles(root: string, files: Record<string, string>): void {
  for (const [path, content] of Object.entries(files)) {
    const full = join(root, path);
    mkdirSync(dirname(full), { recursive: true });
    const executable = content.startsWith("!");
    writeFileSync(full, executable ? content.slice(1) : content, { mode: executable ? 0o755 : 0o644 });
  }
}

/** `git init` + commit of everything in `dir`. */
export function commitAll(dir: string, message = "plugin"): void {
  if (!existsSync(join(dir, ".git"))) git(dir, "init", "-q", "-b", "main");
  git(dir, "add", "-A");
  git(dir, "commit", "-q", "--allow-empty", "-m", message);
}

/** The C tool: prints plain text (not JSON) naming its working directory and its input's size. */
const C_SOURCE = `#include <stdio.h>
#include <unistd.h>
int main(void) {
  char buf[65536]; size_t total = 0, n;
  while ((n = fread(buf, 1, sizeof buf, stdin)) > 0) total += n;
  char cwd[4096];
  if (!getcwd(cwd, sizeof cwd)) return 2;
  printf("compiled tool read %zu bytes in %s\\n", total, cwd);
  return 0;
}
`;

export interface CyclopOneOptions {
  /** plugin.json's name. */
  name: string;
  version?: string;
  permissions?: string[];
  /** Extra tools appended to plugin.json (with their files written by the caller). */
  extraTools?: Record<string, unknown>[];
}

/**
 * A Cyclop One plugin in `dir`: `hello_greet` (the documented shell script, top-level entrypoint),
 * `py_check` (Python, its own entrypoint: `is_error` when `fail` is set), `kv_set` / `kv_get` (Node,
 * one per-tool entrypoint, keeping values in its data directory), `c_info` (a compiled C program
 * printing text), `say_nothing` (empty stdout) and `crash` (exit 3 with stderr).
 */
export function writeCyclopOnePlugin(dir: string, options: CyclopOneOptions): void {
  const manifest = {
    name: options.name,
    version: options.version ?? "1.0.0",
    description: "Tools in four languages.",
    author: "tests",
    entrypoint: "main.sh",
    permissions: options.permissions ?? [],
    tools: [
      {
        name: "hello_greet",
        description: "Returns a greeting for the given name.",
        input_schema: {
          type: "object",
          properties: { name: { type: "string", description: "The name to greet" } },
          required: ["name"],
        },
      },
      {
        name: "py_check",
        description: "Python: reports the request it got, or an error.",
        entrypoint: "tools/check.py",
        input_schema: { type: "object", properties: { fail: { type: "boolean" } }, required: [] },
      },
      {
        name: "kv_set",
        description: "Stores a value.",
        entrypoint: "kv.js",
        input_schema: {
          type: "object",
          properties: { key: { type: "string" }, value: { type: "string" } },
          required: ["key", "value"],
        },
      },
      {
        name: "kv_get",
        description: "Reads a value.",
        entrypoint: "kv.js",
        input_schema: { type: "object", properties: { key: { type: "string" } }, required: ["key"] },
      },
      {
        name: "c_info",
        description: "A compiled program.",
        entrypoint: "bin/info",
        input_schema: { type: "object" },
      },
      { name: "say_nothing", description: "Prints nothing.", entrypoint: "quiet.sh" },
      { name: "crash", description: "Fails.", entrypoint: "crash.sh" },
      ...(options.extraTools ?? []),
    ],
  };
  writeFiles(dir, {
    "plugin.json": JSON.stringify(manifest, null, 2),
    "main.sh": `!#!/bin/bash
set -euo pipefail
REQUEST=$(cat)
NAME=$(/usr/bin/python3 -c "
import sys, json
req = json.loads(sys.stdin.read())
print(req['input'].get('name', 'World'))
" <<< "$REQUEST")
/usr/bin/python3 -c "
import json
print(json.dumps({'result': 'Hello, $NAME!', 'is_error': False}))
"
`,
    "tools/check.py": `!#!/usr/bin/env python3
import json, os, sys
request = json.load(sys.stdin)
if request["input"].get("fail"):
    json.dump({"result": "asked to fail", "is_error": True}, sys.stdout)
else:
    json.dump({"result": json.dumps({
        "tool": request["tool"],
        "cwd": os.getcwd(),
        "context": request["context"],
        "env_plugin_dir": os.environ.get("CYCLOPONE_PLUGIN_DIR"),
        "env_data_dir": os.environ.get("CYCLOPONE_DATA_DIR"),
    }), "is_error": False}, sys.stdout)
`,
    "kv.js": `!#!/usr/bin/env node
const fs = require("fs");
const path = require("path");
let raw = "";
process.stdin.on("data", (chunk) => (raw += chunk));
process.stdin.on("end", () => {
  const request = JSON.parse(raw);
  const file = path.join(process.env.CYCLOPONE_DATA_DIR, "store.json");
  const store = fs.existsSync(file) ? JSON.parse(fs.readFileSync(file, "utf8")) : {};
  if (request.tool === "kv_set") {
    store[request.input.key] = request.input.value;
    fs.writeFileSync(file, JSON.stringify(store));
    console.log(JSON.stringify({ result: "stored " + request.input.key, is_error: false }));
  } else if (request.input.key in store) {
    console.log(JSON.stringify({ result: store[request.input.key], is_error: false }));
  } else {
    console.log(JSON.stringify({ result: "Key not found: " + request.input.key, is_error: true }));
  }
});
`,
    "quiet.sh": "!#!/bin/sh\ncat >/dev/null\n",
    "crash.sh":
      "!#!/bin/sh\ncat >/dev/null\necho 'the crash tool broke' >&2\necho 'ignored stdout'\nexit 3\n",
    "src/info.c": C_SOURCE,
  });
  mkdirSync(join(dir, "bin"), { recursive: true });
  execFileSync("gcc", ["-O1", "-o", join(dir, "bin", "info"), join(dir, "src", "info.c")]);
}

/**
 * A Workbench plugin as Workbench's own plugins are written (`package.json` is just
 * `{"type": "commonjs"}`, so the folder names it): tools returning each kind of result Workbench
 * normalises, one without a description, one with a dotted name that keeps state between calls,
 * one that throws and one that never returns.
 */
export const WORKBENCH_TOOLS = `
let calls = 0;
module.exports.register = (api) => {
  api.registerTool({
    name: "example.echo",
    description: "Echoes a message with statistics",
    inputSchema: {
      type: "object",
      properties: { message: { type: "string", description: "The message", default: "hi" } },
      required: ["message"],
    },
    run: async (input) => ({
      content: input.message,
      metadata: { characterCount: input.message.length, wordCount: input.message.split(/\\s+/).length },
    }),
  });
  api.registerTool({
    name: "text.plain",
    description: "Returns a plain string",
    inputSchema: { type: "object", properties: { name: { type: "string" } } },
    run: async (input) => "Hello, " + (input.name || "World") + "! Welcome to Workbench.",
  });
  api.registerTool({
    name: "text.fail",
    description: "Returns an {error} object",
    inputSchema: { type: "object", properties: {} },
    run: async () => ({ error: "City not found", attempted: "Atlantis" }),
  });
  api.registerTool({
    name: "data.object",
    description: "Returns a plain object",
    inputSchema: { type: "object", properties: {} },
    run: async () => ({ temperature: 29, unit: "F" }),
  });
  api.registerTool({
    name: "data.blocks",
    description: "Returns MCP-style content blocks",
    inputSchema: { type: "object", properties: {} },
    run: async () => ({ content: [{ type: "text", text: "Weather Report:" }, { type: "text", text: "Temperature: 72F" }] }),
  });
  api.registerTool({
    name: "text.long",
    description: "Returns too much",
    inputSchema: { type: "object", properties: {} },
    run: async () => "x".repeat(600000),
  });
  api.registerTool({
    name: "state.counter",
    inputSchema: { type: "object", properties: {} },
    run: async () => { calls += 1; console.log("noise on stdout must not break the host"); return "call " + calls; },
  });
  api.registerTool({
    name: "tool.throws",
    description: "Throws",
    inputSchema: { type: "object", properties: {} },
    run: async () => { throw new Error("something broke inside"); },
  });
  api.registerTool({
    name: "text.huge",
    description: "Returns far too much",
    inputSchema: { type: "object", properties: {} },
    run: async () => ({ content: "y".repeat(10 * 1024 * 1024) }),
  });
  api.registerTool({
    name: "crash.exit",
    description: "Ends its own process",
    inputSchema: { type: "object", properties: {} },
    run: () => { process.stderr.write("exiting on purpose\\n"); process.exit(7); },
  });
  api.registerTool({
    name: "loop.forever",
    description: "Never returns",
    inputSchema: { type: "object", properties: {} },
    run: () => { for (;;) {} },
  });
};
`;

export function writeWorkbenchPlugin(
  dir: string,
  index = WORKBENCH_TOOLS,
  pkg: Record<string, unknown> = { type: "commonjs" },
): void {
  writeFiles(dir, { "package.json": JSON.stringify(pkg, null, 2), "index.js": index });
}

/**
 * A Cyclop One plugin probing what it may reach: `hello`, `dial` (a loopback port: "connected" or
 * "no connection: …") and `peek` (reads a file it is pointed at: "read: …" or "refused: …").
 */
/** Dials a loopback port; says whether it got through. */
const DIAL = `!#!/usr/bin/env python3
import json, socket, sys
request = json.load(sys.stdin)
try:
    connection = socket.create_connection(("127.0.0.1", int(request["input"]["port"])), timeout=3)
    connection.sendall(b"hello")
    connection.close()
    print(json.dumps({"result": "connected"}))
except Exception as error:
    print(json.dumps({"result": "no connection: " + str(error)}))
`;
/** Reads a file it is pointed at; says what it got. */
const PEEK = `!#!/usr/bin/env python3
import json, sys
request = json.load(sys.stdin)
try:
    print(json.dumps({"result": "read: " + open(request["input"]["path"]).read()}))
except Exception as error:
    print(json.dumps({"result": "refused: " + str(error)}))
`;

export function probePlugin(dir: string, name: string, version: string, permissions: string[]): void {
  writeFiles(dir, {
    "plugin.json": JSON.stringify({
      name,
      version,
      description: "Probes what it may reach.",
      permissions,
      tools: [
        { name: "hello", description: "Greets.", entrypoint: "hello.sh" },
        {
          name: "dial",
          description: "Dials a loopback port.",
          entrypoint: "dial.py",
          input_schema: { type: "object", properties: { port: { type: "integer" } }, required: ["port"] },
        },
        {
          name: "peek",
          description: "Reads a file.",
          entrypoint: "peek.py",
          input_schema: { type: "object", properties: { path: { type: "string" } }, required: ["path"] },
        },
      ],
    }),
    "hello.sh": `!#!/bin/sh\ncat >/dev/null\necho '{"result":"hello from ${version}"}'\n`,
    "dial.py": DIAL,
    "peek.py": PEEK,
  });
}

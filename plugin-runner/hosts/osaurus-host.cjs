"use strict";
// The host of one Osaurus plugin (a shared library with the Osaurus C ABI), run by the plugin-runner
// in the plugin's sandbox as the plugin's user. The library is loaded here, never in the runner: a
// crash or a hang of the plugin ends this process only. It speaks JSON, one object per line, on the
// stdout it had at start; whatever the plugin prints goes to stderr.
//   in:  {id, op: "load", library, settingsFile, secrets}
//        {id, op: "invoke", tool, payload, secrets}
//   out: {id, ok: true, manifest, abi} | {id, ok: true, result: string | null} | {id, ok: false, error}
//        {event: "log", level, message} when the plugin calls the host's log()
// Every call into the library runs on koffi's worker threads (`.async`), so the event loop stays
// free to answer the plugin's host callbacks and the runner's other requests.
const fs = require("node:fs");
const path = require("node:path");
const readline = require("node:readline");

const protocol = process.stdout.write.bind(process.stdout);
process.stdout.write = (chunk, encoding, callback) => process.stderr.write(chunk, encoding, callback);
process.on("uncaughtException", (error) => process.stderr.write(`uncaught: ${error && error.stack}\n`));

const koffi = require(process.env.OSAURUS_KOFFI);

/** Answers larger than this are refused here: the runner reads lines of at most 8 MB. */
const MAX_ANSWER_CHARS = 6 * 1024 * 1024;
const NOT_SUPPORTED = JSON.stringify({ error: "not_supported" });

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

const libc = loadLibc();
const strdup = libc.func("void* strdup(const char* s)");

function loadLibc() {
  for (const name of ["libc.so.6", "libc.musl-x86_64.so.1", "libc.musl-aarch64.so.1"]) {
    try {
      return koffi.load(name);
    } catch {
      // the next name
    }
  }
  throw new Error("the C library could not be loaded");
}

const ApiStruct = koffi.struct("osr_plugin_api_v1", {
  free_string: "void*",
  init: "void*",
  destroy: "void*",
  get_manifest: "void*",
  invoke: "void*",
});
const FreeString = koffi.proto("void osr_free_string(void* s)");
const Init = koffi.proto("void* osr_init(void)");
const Destroy = koffi.proto("void osr_destroy(void* ctx)");
const GetManifest = koffi.proto("void* osr_get_manifest(void* ctx)");
const Invoke = koffi.proto(
  "void* osr_invoke(void* ctx, const char* type, const char* id, const char* payload)",
);

// The host API of ABI v2, in the header's order: a version, then 20 function pointers. Slots this
// host does not serve answer {"error":"not_supported"} (or do nothing, for those without an answer).
const JsonOf1 = koffi.proto("void* osr_json_1(const char* a)");
const JsonOf2 = koffi.proto("void* osr_json_2(const char* a, const char* b)");
const JsonOf3 = koffi.proto("void* osr_json_3(const char* a, void* b, void* c)");
const JsonOf0 = koffi.proto("void* osr_json_0(void)");
const VoidOf1 = koffi.proto("void osr_void_1(const char* a)");
const VoidOf2 = koffi.proto("void osr_void_2(const char* a, const char* b)");
const Log = koffi.proto("void osr_log(int level, const char* message)");
const HOST_SLOTS = [
  ["config_get", JsonOf1],
  ["config_set", VoidOf2],
  ["config_delete", VoidOf1],
  ["db_exec", JsonOf2],
  ["db_query", JsonOf2],
  ["log", Log],
  ["dispatch", JsonOf1],
  ["task_status", JsonOf1],
  ["dispatch_cancel", VoidOf1],
  ["dispatch_clarify", VoidOf2],
  ["complete", JsonOf1],
  ["complete_stream", JsonOf3],
  ["embed", JsonOf1],
  ["list_models", JsonOf0],
  ["http_request", JsonOf1],
  ["file_read", JsonOf1],
  ["list_active_tasks", JsonOf0],
  ["send_draft", JsonOf2],
  ["dispatch_interrupt", JsonOf2],
  ["dispatch_add_issue", JsonOf2],
];
const HostStruct = koffi.struct(
  "osr_host_api",
  Object.fromEntries([["version", "uint32_t"], ...HOST_SLOTS.map(([name]) => [name, "void*"])]),
);

let plugin; // {api, ctx, freeString, invoke}
let settingsFile;
let settings = {};
let secrets = {};

function cString(pointer) {
  return pointer === null || pointer === 0n || pointer === undefined
    ? null
    : koffi.decode(pointer, "char", -1);
}

/** A string the plugin owns afterwards (the real host strdup's its answers and never frees them). */
function owned(text) {
  return strdup(text);
}

function saveSettings() {
  const temp = `${settingsFile}.${process.pid}.tmp`;
  fs.writeFileSync(temp, JSON.stringify(settings, null, 2) + "\n", { mode: 0o600 });
  fs.renameSync(temp, settingsFile);
}

/** The host callbacks; kept referenced for the life of the process (the library may call them any time). */
const callbacks = {
  // The plugin's own settings first; a secret the owner set answers a key no setting has.
  config_get: (key) => {
    const value = Object.hasOwn(settings, key)
      ? settings[key]
      : Object.hasOwn(secrets, key)
        ? secrets[key]
        : null;
    return value === null ? null : owned(String(value));
  },
  config_set: (key, value) => {
    if (typeof key !== "string") return;
    settings[key] = value ?? "";
    saveSettings();
  },
  config_delete: (key) => {
    if (typeof key !== "string" || !Object.hasOwn(settings, key)) return;
    delete settings[key];
    saveSettings();
  },
  log: (level, message) => send({ event: "log", level, message: String(message ?? "") }),
};

function hostApi() {
  const values = { version: 2 };
  for (const [name, proto] of HOST_SLOTS) {
    const handler =
      callbacks[name] ?? (proto === VoidOf1 || proto === VoidOf2 ? () => {} : () => owned(NOT_SUPPORTED));
    values[name] = koffi.register(handler, koffi.pointer(proto));
  }
  const pointer = koffi.alloc(HostStruct, 1);
  koffi.encode(pointer, HostStruct, values);
  return pointer;
}

function call(fn, ...args) {
  return new Promise((resolve, reject) =>
    fn.async(...args, (error, value) => (error ? reject(error) : resolve(value))),
  );
}

async function load(message) {
  settingsFile = message.settingsFile;
  try {
    settings = JSON.parse(fs.readFileSync(settingsFile, "utf8"));
    if (!settings || typeof settings !== "object" || Array.isArray(settings)) settings = {};
  } catch {
    settings = {};
  }
  secrets = message.secrets ?? {};
  const library = koffi.load(path.resolve(message.library));
  let entry;
  let abi = 1;
  try {
    entry = library.func("void* osaurus_plugin_entry_v2(void* host)");
    abi = 2;
  } catch {
    try {
      entry = library.func("void* osaurus_plugin_entry(void)");
    } catch {
      throw new Error("the library exports neither osaurus_plugin_entry_v2 nor osaurus_plugin_entry");
    }
  }
  const pointer = abi === 2 ? await call(entry, hostApi()) : await call(entry);
  if (pointer === null || pointer === 0n) {
    throw new Error("the plugin's entry point returned NULL");
  }
  const api = koffi.decode(pointer, ApiStruct);
  for (const field of ["free_string", "init", "get_manifest", "invoke"]) {
    if (!api[field]) throw new Error(`the plugin's function table has no ${field}`);
  }
  const freeString = koffi.decode(api.free_string, FreeString);
  const ctx = await call(koffi.decode(api.init, Init));
  if (ctx === null || ctx === 0n) throw new Error("the plugin's init() returned NULL");
  const raw = await call(koffi.decode(api.get_manifest, GetManifest), ctx);
  const manifest = cString(raw);
  if (manifest === null) throw new Error("the plugin's get_manifest() returned NULL");
  freeString(raw);
  plugin = {
    ctx,
    freeString,
    invoke: koffi.decode(api.invoke, Invoke),
    destroy: api.destroy ? koffi.decode(api.destroy, Destroy) : undefined,
  };
  return { manifest, abi };
}

async function invoke(message) {
  if (!plugin) throw new Error("the plugin is not loaded");
  if (message.secrets && typeof message.secrets === "object") secrets = message.secrets;
  const raw = await call(plugin.invoke, plugin.ctx, "tool", message.tool, message.payload);
  const result = cString(raw);
  if (result !== null) plugin.freeString(raw);
  return { result };
}

async function handle(message) {
  try {
    if (message.op === "load") return { id: message.id, ok: true, ...(await load(message)) };
    if (message.op === "invoke") return { id: message.id, ok: true, ...(await invoke(message)) };
    return { id: message.id, ok: false, error: `unknown op ${message.op}` };
  } catch (error) {
    return { id: message.id, ok: false, error: error instanceof Error ? error.message : String(error) };
  }
}

const lines = readline.createInterface({ input: process.stdin });
lines.on("line", (line) => {
  let message;
  try {
    message = JSON.parse(line);
  } catch {
    return;
  }
  if (!message || typeof message !== "object") return;
  void handle(message).then(send);
});
// The runner closes stdin to unload the plugin: destroy(ctx), as the real host does, then leave.
lines.on("close", () => {
  if (plugin?.destroy) plugin.destroy(plugin.ctx);
  process.exit(0);
});

import { mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import {
  serveDirectory,
  startFakeAnthropic,
  textTurn,
  toolTurn,
  type FakeLlmServer,
} from "@stavrobot/common/test-support";
// The Osaurus test plugin, built with gcc, zipped and signed as its publisher would.
import { makeTempRoot, uniqueName } from "../../plugin-runner/test/helpers.js";
import {
  buildEchoLibrary,
  minisignKeys,
  skillText,
  zipFiles,
} from "../../plugin-runner/test/osaurus-fixtures.js";
import { chat, configFor, createTestEnv, type TestEnv, TRUST_PLUGIN_MANAGEMENT } from "./helpers/app.js";
import { raw } from "./helpers/http.js";
import { startProduct, type Product } from "./helpers/product.js";

/**
 * Osaurus plugins through the agent under `npm start` (the bundles; the LLM is a fake Anthropic server): a C library with the
 * Osaurus ABI compiled at test time (v1 and v2 entries), zipped with a SKILL.md in a subfolder,
 * signed with a trusted minisign key and served on loopback; the model installs it, reads its
 * skill and runs its tools: the payload's `_secrets` (set by the owner) and `_context`, `auto`,
 * `ask` (refused, approved by the owner, then run), `deny`, a slow tool, a crash, a host callback
 * and a NULL answer; a `.dylib`, a badly named zip and a bad signature are refused.
 */
const suffix = uniqueName("oe2e").slice(5);
const echoId = `test.agent${suffix}`;
const echo = `test-agent${suffix}`;
const otherId = `test.other${suffix}`;
const other = `test-other${suffix}`;

let fake: FakeLlmServer;
let testEnv: TestEnv;
let app: Product;
let files: string;
let server: { url: string; close(): Promise<void> };

beforeAll(async () => {
  files = makeTempRoot("osaurus-e2e");
  const keys = minisignKeys();
  const signed = (zip: string, sign = keys.sign): void =>
    writeFileSync(`${zip}.minisig`, sign(readFileSync(zip)));
  const lib = buildEchoLibrary(join(files, "build", "libagent.so"), { pluginId: echoId });
  signed(
    zipFiles(files, `${echoId}-1.0.0.zip`, {
      "libagent.so": readFileSync(lib),
      "docs/SKILL.md": skillText(
        "agent-echo",
        "How to use the echo plugin's tools.",
        "Call echo before anything else.",
      ),
    }),
  );
  const v1 = buildEchoLibrary(join(files, "build", "libother.so"), { pluginId: otherId, v1Only: true });
  // The owner's upload: the same convention, kept aside (not served), with its signature and a
  // forged one (another key's).
  const upload = zipFiles(files, `${otherId}-0.1.0.zip`, { "libother.so": readFileSync(v1) });
  writeFileSync(join(files, "upload.minisig"), keys.sign(readFileSync(upload)));
  writeFileSync(join(files, "forged-upload.minisig"), minisignKeys().sign(readFileSync(upload)));
  const macho = Buffer.alloc(64);
  macho.writeUInt32BE(0xcffaedfe, 0);
  signed(zipFiles(files, `test.mac${suffix}-1.0.0.zip`, { "libMac.dylib": macho }));
  signed(zipFiles(files, `plugin.zip`, { "libagent.so": readFileSync(lib) }));
  const forged = zipFiles(files, `test.forged${suffix}-1.0.0.zip`, { "libagent.so": readFileSync(lib) });
  writeFileSync(`${forged}.minisig`, minisignKeys().sign(readFileSync(forged)));
  server = await serveDirectory(files);

  fake = await startFakeAnthropic();
  // Tools stop after 3 s here (the slow tool's test), and the publisher's key is trusted.
  const plugins = `[plugins]\ntimeoutSeconds = 3\nosaurusTrustedKeys = ["${keys.publicKey}"]\n`;
  testEnv = await createTestEnv(configFor(fake, "anthropic", plugins + TRUST_PLUGIN_MANAGEMENT));
  app = await startProduct(testEnv);
}, 120_000);

afterAll(async () => {
  // Removing a plugin removes its user too (they are this machine's, not the test's).
  for (const name of [echo, other]) await app?.runner("POST", "/remove", { name });
  await app?.stop();
  await server?.close();
  await fake?.close();
  await testEnv?.cleanup();
  if (files) rmSync(files, { recursive: true, force: true });
});

/** The model runs `tool` and answers "done"; returns the tool result the model was given. */
async function modelRuns(
  plugin: string,
  tool: string,
  parameters: Record<string, unknown> = {},
): Promise<string> {
  fake.reset();
  fake.enqueue(
    toolTurn("run_plugin_tool", { plugin, tool, parameters: JSON.stringify(parameters) }),
    textTurn("done"),
  );
  const reply = await chat(app, `run ${tool}`);
  expect(reply.body.response).toMatch(/done$/);
  return fake.requests[1]!.lastUserText;
}

async function modelAsks(args: Record<string, unknown>): Promise<string> {
  fake.reset();
  fake.enqueue(toolTurn("manage_plugins", args), textTurn("ok"));
  await chat(app, "manage plugins");
  return fake.requests[1]!.lastUserText;
}

const owner = (path: string, body: unknown) =>
  raw(app.port, "POST", path, {
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify(body),
  });

describe("Osaurus plugins through the agent", () => {
  it("the model installs a signed package by URL: verified, its skill named in the prompt and read on demand", async () => {
    fake.enqueue(
      toolTurn("manage_plugins", { action: "install", url: `${server.url}/${echoId}-1.0.0.zip` }),
      textTurn("Installed."),
      textTurn("A plugin waits for your approval."),
    );
    await chat(app, "install the echo plugin");
    const result = fake.requests[1]!.lastUserText;
    expect(result).toContain(`Plugin "${echo}" installed.`);
    expect(result).toContain("Its format is Osaurus.");
    expect(result).toContain("The package's minisign signature was verified against a trusted key.");
    expect(result).toContain("It ships 1 skill(s): agent-echo.");
    // The runner tells the owner that its ask tools wait.
    await vi.waitFor(() => expect(fake.requests).toHaveLength(3), { timeout: 30_000 });
    expect(fake.requests[2]!.lastUserText).toContain(`Source: plugin:${echo}/approval`);
    await app.quiet();

    fake.reset();
    fake.enqueue(
      toolTurn("manage_plugins", { action: "read", name: echo, skill: "agent-echo" }),
      textTurn("read"),
    );
    await chat(app, "how do I use it?");
    expect(JSON.stringify(fake.requests[0]!.body.system)).toContain(
      `agent-echo; read one with manage_plugins read`,
    );
    const skill = fake.requests[1]!.lastUserText;
    expect(skill).toContain(`Skill "agent-echo" of plugin "${echo}"`);
    expect(skill).toContain("Call echo before anything else.");
  });

  it("the payload carries the secret the owner set (never through the model) and the working directory", async () => {
    const before = JSON.parse(extractJson(await modelRuns(echo, "echo", { text: "hi" })));
    expect(before).toEqual({ text: "hi", _context: { working_directory: expect.stringContaining(echo) } });
    const configured = await owner("/api/settings/plugins/configure", {
      name: echo,
      config: { api_key: "k-123" },
    });
    expect(configured.status).toBe(200);
    const after = JSON.parse(extractJson(await modelRuns(echo, "echo", { text: "hi" })));
    expect(after._secrets).toEqual({ api_key: "k-123" });
    const shown = await modelAsks({ action: "show", name: echo });
    expect(shown).toContain("api_key");
    expect(shown).not.toContain("k-123");
  });

  it("ask is refused, approved by the owner for that tool, then runs; deny never runs; NULL is an error", async () => {
    expect(await modelRuns(echo, "ask_echo")).toContain("needs the owner's approval");
    const approved = await owner("/api/settings/plugins/approve", { name: echo, tool: "ask_echo" });
    expect(approved.status).toBe(200);
    expect(approved.json.approved).toEqual(["ask_echo"]);
    expect(await modelRuns(echo, "ask_echo", {})).toContain("working_directory");
    expect(await modelRuns(echo, "denied")).toContain('its permission policy is "deny"');
    expect(await modelRuns(echo, "mail")).toContain("which this Linux machine cannot grant");
    expect(await modelRuns(echo, "null")).toContain("Plugin returned NULL response");
  });

  it("a host callback answers; a slow tool is stopped; a crash leaves the runner and another plugin answering", async () => {
    const hostcall = await modelRuns(echo, "hostcall");
    expect(hostcall).toContain("hello from the plugin");
    expect(hostcall).toContain("not_supported");

    // The owner's upload, installed by the model from its stored path.
    const uploads = join(testEnv.dir, "files", "uploads");
    mkdirSync(uploads, { recursive: true });
    const stored = join(uploads, "upload-1234.zip");
    writeFileSync(stored, readFileSync(join(files, `${otherId}-0.1.0.zip`)));
    writeFileSync(join(uploads, "upload-1235.minisig"), readFileSync(join(files, "upload.minisig")));
    writeFileSync(join(uploads, "upload-1236.minisig"), readFileSync(join(files, "forged-upload.minisig")));
    const install = { action: "install", path: stored, file_name: `${otherId}-0.1.0.zip` };
    // A signature uploaded beside it is checked as a URL's .minisig is: another key's is refused.
    expect(await modelAsks({ ...install, signature: join(uploads, "upload-1236.minisig") })).toMatch(
      /signature is not valid, so it was not installed/,
    );
    expect(await modelAsks({ ...install, signature: join(uploads, "missing.minisig") })).toContain(
      "There is no uploaded file at",
    );
    fake.reset();
    fake.enqueue(
      toolTurn("manage_plugins", { ...install, signature: join(uploads, "upload-1235.minisig") }),
      textTurn("ok"),
      textTurn("noted"),
    );
    await chat(app, "install the package I sent");
    const installed = fake.requests[1]!.lastUserText;
    expect(installed).toContain(`Plugin "${other}" installed.`);
    // Its ask tools wait too: the owner is told in a turn of its own.
    await vi.waitFor(() => expect(fake.requests).toHaveLength(3), { timeout: 30_000 });
    await app.quiet();
    expect(installed).toContain("The package's minisign signature was verified against a trusted key.");

    expect(await modelRuns(echo, "slow", { ms: 20_000 })).toContain("timed out after 3 s");
    expect(await modelRuns(echo, "crash")).toMatch(/it crashed.*SIGABRT/s);
    expect(await modelRuns(other, "echo", { text: "still here" })).toContain("still here");
    await vi.waitFor(async () => expect(await modelRuns(echo, "echo", { text: "back" })).toContain("back"), {
      timeout: 15_000,
    });
  }, 60_000);

  it("refuses a .dylib, a badly named zip and a bad signature, saying why", async () => {
    expect(await modelAsks({ action: "install", url: `${server.url}/test.mac${suffix}-1.0.0.zip` })).toMatch(
      /macOS library \(Mach-O\)/,
    );
    expect(await modelAsks({ action: "install", url: `${server.url}/plugin.zip` })).toContain(
      "is not an Osaurus package name",
    );
    expect(
      await modelAsks({ action: "install", url: `${server.url}/test.forged${suffix}-1.0.0.zip` }),
    ).toMatch(
      /signature is not valid, so it was not installed: it was signed with key [0-9A-F]{16}, which is not a trusted key/,
    );
  });
});

/** The JSON object inside a tool result the model saw (the runner's output, fenced or not). */
function extractJson(text: string): string {
  const start = text.indexOf("{");
  const end = text.lastIndexOf("}");
  return text.slice(start, end + 1);
}

import { copyFileSync, chmodSync, mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { vi } from "vitest";
import { chownTree, ensureSystemUser, removeSystemUser, runService, silentLogger } from "@stavrobot/common";
import type { ChatRequest, Owner, RunningService } from "@stavrobot/common";
import type { FakeApp, Json, JsonRequest } from "@stavrobot/common/test-support";
import { isRoot, jsonRequester, makeTempRoot, uniqueName } from "@stavrobot/common/test-support";
import { coderEnvSchema } from "../src/config.js";
import type { Coder } from "../src/service.js";
import { buildCoder } from "../src/service.js";

export { sandboxModes, isRoot, makeTempRoot, startFakeApp, uniqueName } from "@stavrobot/common/test-support";
export type { FakeApp, Json } from "@stavrobot/common/test-support";

export const SECRET = "coder-test-secret-0123456789";
export const FAKE_CLAUDE = fileURLToPath(new URL("./fake-claude.mjs", import.meta.url));

export interface TestCoder {
  url: string;
  root: string;
  pluginsDir: string;
  stateDir: string;
  credentialsDir: string;
  coder: Coder;
  service: RunningService;
  request: JsonRequest;
  /** Submits a task and checks it was accepted. */
  submit(plugin: string, message: string, taskId?: string): Promise<string>;
  close(): Promise<void>;
}

export interface TestCoderOptions {
  appUrl: string;
  root?: string;
  plain?: boolean;
  pluginsDir?: string;
  timeoutMs?: number;
  /** Extra or overriding environment (e.g. ANTHROPIC_API_KEY, CODER_CREDENTIALS_DIR). */
  env?: Record<string, string>;
}

/** The login the tests lend: a fake token that expires in an hour. */
export const LOGIN = JSON.stringify({
  claudeAiOauth: { accessToken: "initial-token", expiresAt: Date.now() + 3_600_000 },
});

/**
 * The real service (the skeleton's runService with the coder's build) on port 0, with the fake
 * CLI copied where any plugin user can run it, and a private credentials directory holding LOGIN.
 */
export async function startCoder(options: TestCoderOptions): Promise<TestCoder> {
  const root = options.root ?? makeTempRoot("coder");
  const pluginsDir = options.pluginsDir ?? join(root, "plugins");
  const stateDir = join(root, "state");
  const credentialsDir = join(root, "credentials");
  const bin = join(root, "bin");
  mkdirSync(pluginsDir, { recursive: true, mode: 0o711 });
  chmodSync(pluginsDir, 0o711);
  mkdirSync(credentialsDir, { recursive: true, mode: 0o700 });
  writeFileSync(join(credentialsDir, ".credentials.json"), LOGIN, { mode: 0o600 });
  mkdirSync(bin, { recursive: true, mode: 0o755 });
  copyFileSync(FAKE_CLAUDE, join(bin, "claude"));
  chmodSync(join(bin, "claude"), 0o755);
  const env: NodeJS.ProcessEnv = {
    PORT: "0",
    STAVROBOT_INTERNAL_SECRET: SECRET,
    PLUGINS_DIR: pluginsDir,
    CODER_STATE_DIR: stateDir,
    CODER_CREDENTIALS_DIR: credentialsDir,
    CODER_SANDBOX: options.plain ? "plain" : "auto",
    CODER_TIMEOUT_MS: String(options.timeoutMs ?? 20_000),
    CODER_MODEL: "test-model",
    CLAUDE_PATH: join(bin, "claude"),
    APP_INTERNAL_URL: options.appUrl,
    PATH: process.env.PATH,
    HOME: process.env.HOME,
    ...options.env,
  };
  let coder: Coder | undefined;
  const service = await runService(
    {
      name: "coder",
      env: coderEnvSchema,
      build: async (context) => {
        coder = await buildCoder(context, { outboxBaseDelayMs: 100, outboxMaxDelayMs: 300 });
        return coder;
      },
    },
    { env, handleSignals: false, logger: silentLogger, graceMs: 1_000 },
  );
  const url = `http://127.0.0.1:${service.port}`;
  const request = jsonRequester(url, SECRET);
  return {
    url,
    root,
    pluginsDir,
    stateDir,
    credentialsDir,
    coder: coder as Coder,
    service,
    request,
    async submit(plugin, message, taskId = `task-${uniqueName("t")}`) {
      const answer = await request("POST", "/code", { taskId, plugin, message });
      if (answer.status !== 202) throw new Error(`submit: ${answer.status} ${JSON.stringify(answer.body)}`);
      return taskId;
    },
    async close() {
      await (coder as Coder).queue.idle();
      await service.stop();
    },
  };
}

/** The Unix user a test plugin belongs to (the plugin-runner gives every plugin one of its own). */
function pluginUser(plugin: string): string {
  return `ctest_${plugin.replaceAll("-", "_")}`;
}

/** Removes a test plugin's user (root only; otherwise a no-op). */
export async function removePluginUser(plugin: string): Promise<void> {
  if (isRoot) await removeSystemUser(pluginUser(plugin));
}

/**
 * An editable plugin as the plugin-runner leaves it: a manifest, owned by the plugin's own user
 * (when root), mode 700.
 */
export async function makePlugin(pluginsDir: string, name: string): Promise<{ dir: string; owner?: Owner }> {
  const dir = join(pluginsDir, name);
  mkdirSync(dir, { mode: 0o700 });
  writeFileSync(join(dir, "manifest.json"), JSON.stringify({ name, description: `The ${name} plugin` }));
  if (!isRoot) return { dir };
  const owner = await ensureSystemUser(pluginUser(name));
  await chownTree(dir, owner);
  return { dir, owner };
}

/** The message the app received for a task (waits for it). */
export function messageFor(app: FakeApp, taskId: string, timeoutMs = 30_000): Promise<ChatRequest> {
  return vi.waitFor(
    () => {
      const found = app.messages.find((message) => message.idempotencyKey === `coder:${taskId}`);
      if (!found) throw new Error(`no result of ${taskId} yet`);
      return found;
    },
    { timeout: timeoutMs },
  );
}

/** What the fake CLI saw, from the REPORT line of its answer. */
export function reportOf(message: ChatRequest): Json {
  const line = /^REPORT (.*)$/m.exec(message.message ?? "");
  if (!line) throw new Error(`no REPORT in: ${message.message}`);
  return JSON.parse(line[1] as string);
}

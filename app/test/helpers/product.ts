import { expect, vi } from "vitest";
import { writeFileSync } from "node:fs";
import { basicAuthHeader } from "@stavrobot/common";
import { jsonRequester, type JsonRequest } from "@stavrobot/common/test-support";
import { INTERNAL_SECRET, PASSWORD, type TestEnv } from "./app.js";
import { raw } from "./http.js";
import { NPM_START, startAppProcess, type AppProcess } from "./process.js";

/**
 * The product as people run it: `npm start` (package.json's script: the bundles, with its node
 * flags and variables) in a process group of its own, on a test's config.toml, data directory and
 * database, its siblings started by its launcher. A test reaches it only the ways a person or a
 * sibling does: its HTTP ports, the plugin-runner's API with the internal secret, its log.
 */
export interface Product extends AppProcess {
  /** The plugin-runner's API (the internal secret the test environment set). */
  runner: JsonRequest;
  /** Waits until no turn runs and no message waits for one (asked of `GET /api/status`). */
  quiet(timeoutMs?: number): Promise<void>;
  /** The plugin-runner's `GET /health` (its sandbox, its MCP servers that keep failing). */
  runnerHealth(): Promise<RunnerHealth>;
}

export interface RunnerHealth {
  status: string;
  sandbox: { mode: "namespaces" | "plain"; tool?: string; users: boolean };
  mcpServersFailing?: { name: string; state: string; lastError?: string }[];
}

/** Starts `npm start` on `testEnv` (plus `env`) and waits until it answers `GET /health`. */
export async function startProduct(
  testEnv: TestEnv,
  options: { env?: NodeJS.ProcessEnv; timeoutMs?: number } = {},
): Promise<Product> {
  const running = await startAppProcess(
    { ...testEnv.env, STAVROBOT_INTERNAL_SECRET: INTERNAL_SECRET, ...options.env },
    options.timeoutMs ?? 120_000,
    NPM_START,
  );
  const runnerUrl = `http://127.0.0.1:${running.runnerPort}`;
  return {
    ...running,
    runner: jsonRequester(runnerUrl, INTERNAL_SECRET),
    async quiet(timeoutMs = 30_000) {
      await vi.waitFor(
        async () => {
          const status = await raw(running.port, "GET", "/api/status");
          expect(status.status).toBe(200);
          expect(status.json.queue).toMatchObject({ busy: false, open: {} });
        },
        { timeout: timeoutMs, interval: 100 },
      );
    },
    async runnerHealth() {
      const response = await fetch(`${runnerUrl}/health`);
      return (await response.json()) as RunnerHealth;
    },
  };
}

/**
 * The owner's message sent as the REPL sends it (`POST /chat` asking for Server-Sent Events),
 * and every event of its turn once the stream ended: `progress`, `tool`, `text`, `answer`….
 */
export async function chatEvents(
  app: { port: number },
  message: string,
): Promise<{ type: string; data: Record<string, unknown> }[]> {
  const response = await fetch(`http://127.0.0.1:${app.port}/chat`, {
    method: "POST",
    headers: {
      Authorization: basicAuthHeader(PASSWORD),
      "Content-Type": "application/json",
      Accept: "text/event-stream",
    },
    body: JSON.stringify({ message, source: "cli" }),
  });
  return (await response.text())
    .split("\n\n")
    .filter((block) => block.startsWith("event: "))
    .map((block) => ({
      type: /^event: (.*)$/m.exec(block)?.[1] ?? "",
      data: JSON.parse(/^data: (.*)$/m.exec(block)?.[1] ?? "null") as Record<string, unknown>,
    }));
}

/** The `progress` events of a turn (see `chatEvents`). */
export async function progressOf(app: { port: number }, message: string): Promise<Record<string, unknown>[]> {
  return (await chatEvents(app, message))
    .filter((event) => event.type === "progress")
    .map((event) => event.data);
}

/**
 * Stops the product after taking its MCP declarations away while it runs (`config` is the
 * config.toml without them), so the servers stop and their users and grants go first (they are
 * this machine's users); waits until `plugin`, one of them, is gone, at most 30 s.
 */
export async function stopAfterServersGo(
  app: Product,
  testEnv: TestEnv,
  config: string,
  plugin: string,
): Promise<void> {
  writeFileSync(testEnv.env.CONFIG_PATH as string, config);
  await vi
    .waitFor(async () => expect((await app.runner("GET", `/bundles/${plugin}`)).status).toBe(404), {
      timeout: 30_000,
    })
    .catch(() => undefined);
  await app.stop();
}

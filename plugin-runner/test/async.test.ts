import { rmSync } from "node:fs";
import { setTimeout as sleep } from "node:timers/promises";
import { afterAll, describe, expect, it, vi } from "vitest";
import { TURN_HEADER, chatRequestSchema, silentLogger } from "@stavrobot/common";
import { freePort } from "@stavrobot/common/test-support";
import type { FakeApp, TestPluginHost } from "./helpers.js";
import {
  SECRET,
  isRoot,
  makeTempRoot,
  startFakeApp,
  startPluginHost,
  uniqueName,
  userExists,
  writePlugin,
} from "./helpers.js";
import { createIsolation, pluginUserName } from "../src/users.js";

/** Writes its report where published tools do: /tmp/<plugin name>/. */
const slowReport = (plugin: string) => `#!/bin/sh
cat >/dev/null
sleep 0.3
printf 'report body' > /tmp/${plugin}/report.txt
echo '{"done": true}'
`;

const names: string[] = [];
const cleanups: (() => Promise<void>)[] = [];

afterAll(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup();
  const isolation = createIsolation({ enabled: isRoot, logger: silentLogger });
  for (const name of names) if (isRoot && userExists(pluginUserName(name))) await isolation.removeUser(name);
});

function asyncPlugin(t: TestPluginHost): string {
  const name = uniqueName("async");
  names.push(name);
  writePlugin(t.pluginsDir, name, [
    { name: "report", script: slowReport(name), manifest: { async: true } },
    { name: "broken", script: "#!/bin/sh\necho 'async failure' >&2\nexit 2\n", manifest: { async: true } },
  ]);
  return name;
}

describe("async tools and the outbox", () => {
  it("delivers the result once the app comes up, with files", async () => {
    const appPort = await freePort();
    const t = await startPluginHost({ appUrl: `http://127.0.0.1:${appPort}` });
    cleanups.push(async () => {
      await t.close();
      rmSync(t.root, { recursive: true, force: true });
    });
    const name = asyncPlugin(t);

    const started = await t.request("POST", `/bundles/${name}/tools/report/run`, {});
    expect(started).toEqual({ status: 202, body: { status: "running" } });
    await t.host.background.idle();
    expect(await t.host.outbox.pending()).toHaveLength(1);
    // Let a few deliveries fail while the app is down.
    await sleep(400);
    expect(await t.host.outbox.pending()).toHaveLength(1);

    const app: FakeApp = await startFakeApp({ port: appPort });
    cleanups.push(() => app.close());
    await vi.waitFor(() => expect(app.messages).toHaveLength(1), 10_000);
    const [message] = app.messages;
    expect(message?.source).toBe(`plugin:${name}/report`);
    expect(message?.pluginResult).toEqual({
      plugin: name,
      tool: "report",
      outcome: {
        success: true,
        output: { done: true },
        files: [{ filename: "report.txt", data: Buffer.from("report body").toString("base64") }],
      },
    });
    expect(app.authorizations[0]).toBe(`Bearer ${SECRET}`);
    await vi.waitFor(async () => expect(await t.host.outbox.pending()).toEqual([]), 5_000);

    await t.request("POST", `/bundles/${name}/tools/broken/run`, {});
    await vi.waitFor(() => expect(app.messages).toHaveLength(2), 10_000);
    expect(app.messages[1]?.pluginResult).toEqual({
      plugin: name,
      tool: "broken",
      outcome: { success: false, error: "async failure" },
    });
  });

  it("sends a result back naming the app's turn that started the run, and none for a run without one", async () => {
    const app = await startFakeApp();
    cleanups.push(() => app.close());
    const t = await startPluginHost({ appUrl: app.url });
    cleanups.push(async () => {
      await t.close();
      rmSync(t.root, { recursive: true, force: true });
    });
    const name = asyncPlugin(t);

    const run = (headers: Record<string, string>) =>
      fetch(`${t.url}/bundles/${name}/tools/broken/run`, {
        method: "POST",
        headers: { Authorization: `Bearer ${SECRET}`, "Content-Type": "application/json", ...headers },
        body: "{}",
      });
    expect((await run({ [TURN_HEADER]: "42" })).status).toBe(202);
    await vi.waitFor(() => expect(app.messages).toHaveLength(1), 10_000);
    expect(app.messages[0]?.turn).toBe(42);
    // An older app names no turn (and a header that is no turn id is none): the result carries none.
    const without: Record<string, string>[] = [{}, { [TURN_HEADER]: "3000000000" }, { [TURN_HEADER]: "-1" }];
    for (const headers of without) {
      expect((await run(headers)).status).toBe(202);
    }
    await vi.waitFor(() => expect(app.messages).toHaveLength(4), 10_000);
    for (const message of app.messages.slice(1)) expect(message).not.toHaveProperty("turn");
    for (const message of app.messages) expect(chatRequestSchema.safeParse(message).success).toBe(true);
  });

  it("gives each result its own idempotency key and repeats it on every attempt", async () => {
    const app = await startFakeApp({ statuses: [503] });
    cleanups.push(() => app.close());
    const t = await startPluginHost({ appUrl: app.url });
    cleanups.push(async () => {
      await t.close();
      rmSync(t.root, { recursive: true, force: true });
    });
    const name = asyncPlugin(t);

    await t.request("POST", `/bundles/${name}/tools/report/run`, {});
    await t.request("POST", `/bundles/${name}/tools/broken/run`, {});
    await vi.waitFor(() => expect(app.messages).toHaveLength(3), 10_000);
    await vi.waitFor(async () => expect(await t.host.outbox.pending()).toEqual([]), 5_000);
    // Accepted as the app accepts a result: kept for its turn (`Prefer: respond-async`).
    expect(app.answered).toEqual([503, 202, 202]);
    expect(app.prefer).toEqual(["respond-async", "respond-async", "respond-async"]);
    for (const message of app.messages) expect(chatRequestSchema.safeParse(message).success).toBe(true);
    // The refused one was sent again with the same key; the other has its own.
    const failed = app.messages[0];
    const same = (a: unknown, b: unknown) => JSON.stringify(a) === JSON.stringify(b);
    const retried = app.messages.slice(1).find((message) => same(message.pluginResult, failed?.pluginResult));
    const other = app.messages.find((message) => !same(message.pluginResult, failed?.pluginResult));
    expect(failed?.idempotencyKey).toMatch(/^[A-Za-z0-9._:-]{8,200}$/);
    expect(retried?.idempotencyKey).toBe(failed?.idempotencyKey);
    expect(other?.idempotencyKey).toMatch(/^[A-Za-z0-9._:-]{8,200}$/);
    expect(other?.idempotencyKey).not.toBe(failed?.idempotencyKey);
  });

  it("re-sends a result with its original idempotency key after the runner restarts", async () => {
    const app = await startFakeApp({ statuses: Array<number>(1_000).fill(503) });
    cleanups.push(() => app.close());
    const root = makeTempRoot("plugin-runner-restart-key");
    cleanups.push(async () => rmSync(root, { recursive: true, force: true }));
    const first = await startPluginHost({ root, appUrl: app.url });
    const name = asyncPlugin(first);
    await first.request("POST", `/bundles/${name}/tools/report/run`, {});
    await vi.waitFor(() => expect(app.messages.length).toBeGreaterThanOrEqual(1), 10_000);
    await first.close();
    const refused = app.messages.length;
    const original = app.messages[0]?.idempotencyKey;
    expect(original).toMatch(/^[A-Za-z0-9._:-]{8,200}$/);

    app.statuses.length = 0;
    const second = await startPluginHost({ root, appUrl: app.url });
    cleanups.push(() => second.close());
    await vi.waitFor(() => expect(app.answered).toContain(202), 10_000);
    expect(app.messages).toHaveLength(refused + 1);
    expect(app.messages.map((message) => message.idempotencyKey)).toEqual(
      Array<string | undefined>(refused + 1).fill(original),
    );
    await vi.waitFor(async () => expect(await second.host.outbox.pending()).toEqual([]), 5_000);
  });

  it("re-sends undelivered results after the runner restarts", async () => {
    const appPort = await freePort();
    const root = makeTempRoot("plugin-runner-restart");
    cleanups.push(async () => rmSync(root, { recursive: true, force: true }));
    const first = await startPluginHost({ root, appUrl: `http://127.0.0.1:${appPort}` });
    const name = asyncPlugin(first);
    await first.request("POST", `/bundles/${name}/tools/report/run`, {});
    await first.host.background.idle();
    expect(await first.host.outbox.pending()).toHaveLength(1);
    await first.close();

    const app = await startFakeApp({ port: appPort });
    cleanups.push(() => app.close());
    await sleep(300);
    expect(app.messages).toHaveLength(0); // The stopped runner delivers nothing.

    const second = await startPluginHost({ root, appUrl: `http://127.0.0.1:${appPort}` });
    cleanups.push(() => second.close());
    await vi.waitFor(() => expect(app.messages).toHaveLength(1), 10_000);
    expect(app.messages[0]?.source).toBe(`plugin:${name}/report`);
    await vi.waitFor(async () => expect(await second.host.outbox.pending()).toEqual([]), 5_000);
  });
});

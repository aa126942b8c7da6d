import { rmSync } from "node:fs";
import { afterAll, describe, expect, it } from "vitest";
import type { FakeApp, TestRunner } from "./helpers.js";
import {
  SECRET,
  freePort,
  isRoot,
  makeTempRoot,
  startFakeApp,
  startRunner,
  uniqueName,
  userExists,
  waitFor,
  writePlugin,
} from "./helpers.js";
import { chatRequestSchema, silentLogger } from "@stavrobot/common";
import { createIsolation, pluginUserName } from "../src/users.js";

const SLOW_REPORT = `#!/bin/sh
input=$(cat)
sleep 0.3
dir=$(printf '%s' "$input" | sed -n 's/.*"_output_dir":"\\([^"]*\\)".*/\\1/p')
printf 'report body' > "$dir/report.txt"
echo '{"done": true}'
`;

const names: string[] = [];
const cleanups: (() => Promise<void>)[] = [];

afterAll(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup();
  const isolation = createIsolation({ enabled: isRoot, logger: silentLogger });
  for (const name of names) if (isRoot && userExists(pluginUserName(name))) await isolation.removeUser(name);
});

function asyncPlugin(t: TestRunner): string {
  const name = uniqueName("async");
  names.push(name);
  writePlugin(t.pluginsDir, name, [
    { name: "report", script: SLOW_REPORT, manifest: { async: true } },
    { name: "broken", script: "#!/bin/sh\necho 'async failure' >&2\nexit 2\n", manifest: { async: true } },
  ]);
  return name;
}

describe("async tools and the outbox", () => {
  it("delivers the result once the app comes up, with files", async () => {
    const appPort = await freePort();
    const t = await startRunner({ appUrl: `http://127.0.0.1:${appPort}` });
    cleanups.push(async () => {
      await t.close();
      rmSync(t.root, { recursive: true, force: true });
    });
    const name = asyncPlugin(t);

    const started = await t.request("POST", `/bundles/${name}/tools/report/run`, {});
    expect(started).toEqual({ status: 202, body: { status: "running" } });
    await t.runner.background.idle();
    expect(await t.runner.outbox.pending()).toHaveLength(1);
    // Let a few deliveries fail while the app is down.
    await new Promise((resolve) => setTimeout(resolve, 400));
    expect(await t.runner.outbox.pending()).toHaveLength(1);

    const app: FakeApp = await startFakeApp(appPort);
    cleanups.push(() => app.close());
    await waitFor(() => app.messages.length === 1, 10_000, "delivery");
    const [message] = app.messages;
    expect(message?.source).toBe(`plugin:${name}/report`);
    expect(message?.message).toBe(
      `The run of tool "report" (plugin "${name}") returned:\n\`\`\`\n${JSON.stringify({ done: true }, null, 2)}\n\`\`\``,
    );
    expect(message?.files).toEqual([
      { filename: "report.txt", data: Buffer.from("report body").toString("base64"), mimeType: "text/plain" },
    ]);
    expect(app.authorizations[0]).toBe(`Bearer ${SECRET}`);
    await waitFor(async () => (await t.runner.outbox.pending()).length === 0, 5_000, "outbox to empty");

    await t.request("POST", `/bundles/${name}/tools/broken/run`, {});
    await waitFor(() => app.messages.length === 2, 10_000, "failure delivery");
    expect(app.messages[1]?.message).toBe(
      `The run of tool "broken" (plugin "${name}") failed:\n\`\`\`\nasync failure\n\`\`\``,
    );
  });

  it("gives each result its own idempotency key and repeats it on every attempt", async () => {
    const app = await startFakeApp(0, [503]);
    cleanups.push(() => app.close());
    const t = await startRunner({ appUrl: app.url });
    cleanups.push(async () => {
      await t.close();
      rmSync(t.root, { recursive: true, force: true });
    });
    const name = asyncPlugin(t);

    await t.request("POST", `/bundles/${name}/tools/report/run`, {});
    await t.request("POST", `/bundles/${name}/tools/broken/run`, {});
    await waitFor(() => app.messages.length === 3, 10_000, "three deliveries");
    await waitFor(async () => (await t.runner.outbox.pending()).length === 0, 5_000, "outbox to empty");
    expect(app.answered).toEqual([503, 200, 200]);
    for (const message of app.messages) expect(chatRequestSchema.safeParse(message).success).toBe(true);
    const [failed, retried, other] = app.messages;
    expect(retried?.message).toBe(failed?.message);
    expect(other?.message).not.toBe(failed?.message);
    expect(failed?.idempotencyKey).toMatch(/^[A-Za-z0-9._:-]{8,200}$/);
    expect(retried?.idempotencyKey).toBe(failed?.idempotencyKey);
    expect(other?.idempotencyKey).toMatch(/^[A-Za-z0-9._:-]{8,200}$/);
    expect(other?.idempotencyKey).not.toBe(failed?.idempotencyKey);
  });

  it("re-sends a result with its original idempotency key after the runner restarts", async () => {
    const app = await startFakeApp(0, Array<number>(1_000).fill(503));
    cleanups.push(() => app.close());
    const root = makeTempRoot("plugin-runner-restart-key");
    cleanups.push(async () => rmSync(root, { recursive: true, force: true }));
    const first = await startRunner({ root, appUrl: app.url });
    const name = asyncPlugin(first);
    await first.request("POST", `/bundles/${name}/tools/report/run`, {});
    await waitFor(() => app.messages.length >= 1, 10_000, "a first, refused delivery");
    await first.close();
    const refused = app.messages.length;
    const original = app.messages[0]?.idempotencyKey;
    expect(original).toMatch(/^[A-Za-z0-9._:-]{8,200}$/);

    app.statuses.length = 0;
    const second = await startRunner({ root, appUrl: app.url });
    cleanups.push(() => second.close());
    await waitFor(() => app.answered.includes(200), 10_000, "re-delivery after restart");
    expect(app.messages).toHaveLength(refused + 1);
    expect(app.messages.map((message) => message.idempotencyKey)).toEqual(
      Array<string | undefined>(refused + 1).fill(original),
    );
    await waitFor(async () => (await second.runner.outbox.pending()).length === 0, 5_000, "outbox to empty");
  });

  it("re-sends undelivered results after the runner restarts", async () => {
    const appPort = await freePort();
    const root = makeTempRoot("plugin-runner-restart");
    cleanups.push(async () => rmSync(root, { recursive: true, force: true }));
    const first = await startRunner({ root, appUrl: `http://127.0.0.1:${appPort}` });
    const name = asyncPlugin(first);
    await first.request("POST", `/bundles/${name}/tools/report/run`, {});
    await first.runner.background.idle();
    expect(await first.runner.outbox.pending()).toHaveLength(1);
    await first.close();

    const app = await startFakeApp(appPort);
    cleanups.push(() => app.close());
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(app.messages).toHaveLength(0); // The stopped runner delivers nothing.

    const second = await startRunner({ root, appUrl: `http://127.0.0.1:${appPort}` });
    cleanups.push(() => second.close());
    await waitFor(() => app.messages.length === 1, 10_000, "re-delivery after restart");
    expect(app.messages[0]?.source).toBe(`plugin:${name}/report`);
    await waitFor(async () => (await second.runner.outbox.pending()).length === 0, 5_000, "outbox to empty");
  });
});

import { cpSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import type { Server } from "node:net";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { commitAll, probePlugin, writeCyclopOnePlugin, writeWorkbenchPlugin } from "./format-fixtures.js";
import type { FakeApp, GitDaemon, TestPluginHost } from "./helpers.js";
import {
  isRoot,
  makeTempRoot,
  sandboxModes,
  startFakeApp,
  startGitDaemon,
  startPluginHost,
  uniqueName,
  writePlugin,
} from "./helpers.js";

/**
 * The permission model, enforced: Cyclop One plugins wait for the owner's approval (per tool, per
 * version) and have network only when they declared it; the owner switches any plugin's network off;
 * where the sandbox cannot cut the network, plugins that must not have it do not run unless allowed.
 * Hostile plugins: one without `network` dialling a port the test listens on, one reading another
 * plugin's data directory.
 */
describe.each(sandboxModes())("approval and network (%s sandbox)", (mode, plainSandbox) => {
  let t: TestPluginHost;
  let app: FakeApp;
  let daemon: GitDaemon;
  let repos: string;
  let listener: Server;
  let port: number;
  let connections = 0;
  const netless = uniqueName("netless");
  const netful = uniqueName("netful");
  const keeper = uniqueName("keeper");
  const stavro = uniqueName("stavro-net");
  const enforced = mode === "namespaces";

  beforeAll(async () => {
    repos = makeTempRoot("permission-repos");
    probePlugin(join(repos, "netless"), netless, "1.0.0", ["filesystem:read"]);
    probePlugin(join(repos, "netful"), netful, "1.0.0", ["network", "shell"]);
    // It declares network, so it runs in plain mode too.
    writeCyclopOnePlugin(join(repos, "keeper"), { name: keeper, permissions: ["network"] });
    for (const repo of ["netless", "netful", "keeper"]) commitAll(join(repos, repo));
    daemon = await startGitDaemon(repos);
    listener = createServer((socket) => {
      connections++;
      socket.destroy();
    });
    port = await new Promise<number>((resolve) =>
      listener.listen(0, "127.0.0.1", () => resolve((listener.address() as { port: number }).port)),
    );
    app = await startFakeApp();
    t = await startPluginHost({ plainSandbox, appUrl: app.url });
    for (const repo of ["netless", "netful", "keeper"]) {
      expect((await t.request("POST", "/install", { url: daemon.url(repo) })).status).toBe(200);
    }
  }, 60_000);

  afterAll(async () => {
    for (const name of [netless, netful, keeper, stavro]) await t?.request("POST", "/remove", { name });
    await t?.close();
    await app?.close();
    await daemon?.stop();
    await new Promise((resolve) => listener?.close(resolve));
    rmSync(repos, { recursive: true, force: true });
    if (t) rmSync(t.root, { recursive: true, force: true });
  });

  const run = (plugin: string, tool: string, params: Record<string, unknown> = {}) =>
    t.request("POST", `/bundles/${plugin}/tools/${tool}/run`, params);

  it("says in GET /health and the list whether the network can be cut here", async () => {
    const health = (await fetch(`${t.url}/health`).then((response) => response.json())) as {
      network: unknown;
    };
    expect(health.network).toEqual({ enforced, allowWithoutCut: false });
    const list = await t.request("GET", "/bundles");
    expect(list.body.network).toEqual({ enforced, allowWithoutCut: false });
  });

  it("refuses an unapproved Cyclop One plugin, saying where to approve it, and tells the owner once", async () => {
    const refused = await run(netless, "hello");
    expect(refused.status).toBe(200);
    expect(refused.body.success).toBe(false);
    expect(refused.body.error).toContain(
      `Plugin "${netless}" (Cyclop One, version 1.0.0) needs the owner's approval`,
    );
    expect(refused.body.error).toContain("/settings/plugins");
    expect(refused.body.error).toContain(`POST /api/settings/plugins/approve {"name": "${netless}"}`);
    await vi.waitFor(() =>
      expect(app.messages.map((message) => message.source)).toContain(`plugin:${netless}/approval`),
    );
    const notice = app.messages.find((message) => message.source === `plugin:${netless}/approval`);
    expect(notice?.message).toContain("filesystem:read");
    expect(app.messages.filter((message) => message.source === `plugin:${netless}/approval`)).toHaveLength(1);
    const detail = await t.request("GET", `/bundles/${netless}`);
    expect(detail.body).toMatchObject({
      format: "cyclopone",
      version: "1.0.0",
      asks: ["filesystem:read"],
      network: false,
      networkAllowed: false,
      waitingApproval: ["hello", "dial", "peek"],
    });
  });

  it("approves one tool, then the rest", async () => {
    const one = await t.request("POST", "/approve", { name: netless, tool: "hello" });
    expect(one.status).toBe(200);
    expect(one.body.approved).toEqual(["hello"]);
    expect(one.body.message).toContain("Still waiting: dial, peek");
    const hello = await run(netless, "hello");
    expect(hello.body).toEqual(
      enforced
        ? { success: true, output: "hello from 1.0.0" }
        : { success: false, error: expect.stringContaining("cannot remove the network") },
    );
    expect((await run(netless, "dial", { port })).body.error).toContain("needs the owner's approval");
    const unknown = await t.request("POST", "/approve", { name: netless, tool: "nope" });
    expect(unknown.status).toBe(404);
    for (const name of [netless, netful, keeper]) {
      expect((await t.request("POST", "/approve", { name })).status).toBe(200);
    }
    expect((await t.request("GET", `/bundles/${netless}`)).body.waitingApproval).toEqual([]);
  });

  it("cuts the network of a plugin that did not declare it: its connection is refused", async () => {
    const before = connections;
    const answer = await run(netless, "dial", { port });
    if (enforced) {
      expect(answer.body.success).toBe(true);
      expect(answer.body.output).toMatch(/^no connection: .*(refused|unreachable)/i);
    } else {
      // Plain mode cannot cut it: such a plugin does not run at all.
      expect(answer.body.error).toContain("cannot remove the network");
    }
    expect(connections).toBe(before);
  });

  it("gives the network to a plugin that declared it, loopback included, until the owner switches it off", async () => {
    expect((await run(netful, "dial", { port })).body).toEqual({ success: true, output: "connected" });
    await vi.waitFor(() => expect(connections).toBeGreaterThan(0));
    const off = await t.request("POST", "/network", { name: netful, network: false });
    expect(off.status).toBe(200);
    expect((await t.request("GET", `/bundles/${netful}`)).body).toMatchObject({
      network: false,
      networkAllowed: true,
    });
    const before = connections;
    const cut = await run(netful, "dial", { port });
    if (enforced) expect(cut.body.output).toMatch(/^no connection/);
    else expect(cut.body.error).toContain("cannot remove the network");
    expect(connections).toBe(before);
    expect((await t.request("POST", "/network", { name: netful, network: true })).status).toBe(200);
    expect((await run(netful, "dial", { port })).body.output).toBe("connected");
  });

  it("lets the owner switch off, never on, what a plugin did not ask for; Stavrobot plugins keep network by default", async () => {
    const more = await t.request("POST", "/network", { name: netless, network: true });
    expect(more.status).toBe(400);
    expect(more.body.error).toContain("did not ask for network");
    writePlugin(t.pluginsDir, stavro, [
      {
        name: "dial",
        script: `#!/usr/bin/env python3\nimport json, socket, sys\np = json.load(sys.stdin)\ntry:\n    socket.create_connection(("127.0.0.1", p["port"]), timeout=3).close()\n    print("connected")\nexcept Exception as e:\n    print("no connection: " + str(e))\n`,
        manifest: { parameters: { port: { type: "integer", description: "Port" } } },
      },
    ]);
    await t.host.watcher.settle();
    expect((await t.request("GET", `/bundles/${stavro}`)).body).toMatchObject({
      format: "stavrobot",
      network: true,
    });
    expect((await t.request("POST", `/bundles/${stavro}/tools/dial/run`, { port })).body.output).toBe(
      "connected\n",
    );
    await t.request("POST", "/network", { name: stavro, network: false });
    const cut = await t.request("POST", `/bundles/${stavro}/tools/dial/run`, { port });
    if (enforced) expect(cut.body.output).toMatch(/^no connection/);
    else expect(cut.body.error).toContain("cannot remove the network");
  });

  it.runIf(isRoot)("refuses a plugin reading another plugin's data directory", async () => {
    expect((await run(keeper, "kv_set", { key: "token", value: "keeper-private-value" })).body.success).toBe(
      true,
    );
    const path = enforced
      ? `/plugin-data/${keeper}/store.json`
      : join(t.root, "plugin-data", keeper, "store.json");
    const answer = await run(netful, "peek", { path });
    expect(answer.body.success).toBe(true);
    expect(answer.body.output).toMatch(
      enforced ? /^refused: .*No such file or directory/ : /^refused: .*Permission denied/,
    );
    expect(answer.body.output).not.toContain("keeper-private-value");
    // Its own data directory is its own.
    expect((await run(keeper, "kv_get", { key: "token" })).body.output).toBe("keeper-private-value");
  });

  it("asks again when the version changes, and tells the owner again", async () => {
    probePlugin(join(repos, "netful"), netful, "1.1.0", ["network", "shell"]);
    commitAll(join(repos, "netful"), "v1.1.0");
    const updated = await t.request("POST", "/update", { name: netful });
    expect(updated.status).toBe(200);
    expect(updated.body.message).toContain("wait for the owner's approval of version 1.1.0");
    expect((await run(netful, "hello")).body.error).toContain("version 1.1.0) needs the owner's approval");
    await vi.waitFor(() =>
      expect(app.messages.filter((message) => message.source === `plugin:${netful}/approval`)).toHaveLength(
        2,
      ),
    );
    await t.request("POST", "/approve", { name: netful });
    expect((await run(netful, "hello")).body).toEqual({ success: true, output: "hello from 1.1.0" });
  });

  it("picks up plugins put into the plugins directory by hand, renaming a folder named unlike a plugin", async () => {
    const cyclop = uniqueName("dropped");
    probePlugin(join(repos, "dropped"), cyclop, "2.0.0", ["network"]);
    const wbName = uniqueName("hand-wb");
    writeWorkbenchPlugin(join(repos, "hand_wb"), undefined, { type: "commonjs" });
    cpSync(join(repos, "dropped"), join(t.pluginsDir, cyclop), { recursive: true });
    cpSync(join(repos, "hand_wb"), join(t.pluginsDir, wbName.replaceAll("-", "_")), { recursive: true });
    try {
      await vi.waitFor(
        async () => {
          const list = await t.request("GET", "/bundles");
          const names = list.body.plugins.map((plugin: { name: string }) => plugin.name);
          expect(names).toEqual(expect.arrayContaining([cyclop, wbName]));
        },
        { timeout: 15_000, interval: 300 },
      );
      await vi.waitFor(() =>
        expect(app.messages.map((message) => message.source)).toContain(`plugin:${cyclop}/approval`),
      );
      expect((await run(wbName, "text.plain", { name: "hand" })).body.output).toBe(
        "Hello, hand! Welcome to Workbench.",
      );
    } finally {
      for (const name of [cyclop, wbName]) await t.request("POST", "/remove", { name });
    }
  });
});

describe("plain sandbox, with the owner's leave to run without a network cut", () => {
  it("runs a plugin that must not have network, warning that it is not cut", async () => {
    const app = await startFakeApp();
    const repos = makeTempRoot("leave-repos");
    const name = uniqueName("leave");
    probePlugin(join(repos, "leave"), name, "1.0.0", []);
    commitAll(join(repos, "leave"));
    const daemon = await startGitDaemon(repos);
    const t = await startPluginHost({ plainSandbox: true, appUrl: app.url, allowWithoutNetworkCut: true });
    try {
      expect(
        ((await fetch(`${t.url}/health`).then((r) => r.json())) as { network: unknown }).network,
      ).toEqual({
        enforced: false,
        allowWithoutCut: true,
      });
      await t.request("POST", "/install", { url: daemon.url("leave") });
      await t.request("POST", "/approve", { name });
      expect((await t.request("POST", `/bundles/${name}/tools/hello/run`, {})).body).toEqual({
        success: true,
        output: "hello from 1.0.0",
      });
    } finally {
      await t.request("POST", "/remove", { name });
      await t.close();
      await daemon.stop();
      await app.close();
      rmSync(repos, { recursive: true, force: true });
      rmSync(t.root, { recursive: true, force: true });
    }
  });
});

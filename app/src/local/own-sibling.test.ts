import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it, vi } from "vitest";
import { z } from "zod";
import {
  EXIT_IN_USE,
  Router,
  createServiceClient,
  runService,
  silentLogger,
  type RunningService,
} from "@stavrobot/common";
import { ownSiblingClient } from "./own-sibling.js";
import { startSibling } from "./sibling.js";

const SECRET = "the-secret-of-this-instance";
const services: RunningService[] = [];
const dirs: string[] = [];

afterEach(async () => {
  for (const service of services.splice(0)) await service.stop();
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

/** A sibling as runService runs it (its /health and Bearer guard), started by some instance. */
async function sibling(instance: string, secret: string): Promise<RunningService> {
  const service = await runService(
    {
      name: "plugin-runner",
      env: z.object({}),
      build: () => ({ router: new Router().get("/plugins", () => ({ json: { plugins: ["mine"] } })) }),
    },
    {
      env: { PORT: "0", STAVROBOT_INTERNAL_SECRET: secret, STAVROBOT_INSTANCE_ID: instance },
      handleSignals: false,
      logger: silentLogger,
    },
  );
  services.push(service);
  return service;
}

const clientOf = (port: number) =>
  ownSiblingClient(createServiceClient({ baseUrl: `http://127.0.0.1:${port}`, bearer: SECRET, retries: 0 }), {
    name: "plugin-runner",
    instance: "this-instance",
    variable: "PLUGIN_RUNNER_PORT",
  });

describe("ownSiblingClient", () => {
  it("uses its own sibling", async () => {
    const own = await sibling("this-instance", SECRET);
    const response = await clientOf(own.port).request("GET", "/plugins");
    expect(response.data).toEqual({ plugins: ["mine"] });
  });

  it("refuses another instance's sibling on its port, saying so instead of Unauthorized", async () => {
    const foreign = await sibling("another-instance", "the-secret-of-another-one");
    const client = clientOf(foreign.port);
    const refusal = client.request("GET", "/plugins");
    await expect(refusal).rejects.toThrow(
      `The plugin-runner at http://127.0.0.1:${foreign.port} is not this Stavrobot's: another program ` +
        "(or another Stavrobot) listens on its port. Set PLUGIN_RUNNER_PORT to a free port and restart.",
    );
    // Even one sharing this instance's secret, which would have answered.
    const sharing = await sibling("another-instance", SECRET);
    await expect(clientOf(sharing.port).request("GET", "/plugins")).rejects.toThrow(
      /is not this Stavrobot's/,
    );
  });

  it("checks again once its sibling went away, and finds another instance's in its place", async () => {
    const own = await sibling("this-instance", SECRET);
    const port = own.port;
    const client = clientOf(port);
    expect((await client.request("GET", "/plugins")).status).toBe(200);
    await services.shift()!.stop();
    await expect(client.request("GET", "/plugins")).rejects.toThrow(/unreachable/);
    // Another instance's sibling takes the port meanwhile.
    const usurper = await runService(
      { name: "plugin-runner", env: z.object({}), build: () => ({ router: new Router() }) },
      {
        env: {
          PORT: String(port),
          STAVROBOT_INTERNAL_SECRET: "other-secret-0123456789",
          STAVROBOT_INSTANCE_ID: "x",
        },
        handleSignals: false,
        logger: silentLogger,
      },
    );
    services.push(usurper);
    await expect(client.request("GET", "/plugins")).rejects.toThrow(/is not this Stavrobot's/);
  });

  it("says whose sibling it is when one that replaced its own unseen answers Unauthorized", async () => {
    // One server that stops being this instance's between two requests, its connection kept.
    let instance = "this-instance";
    const server = createServer((req, res) => {
      res.setHeader("Content-Type", "application/json");
      if (req.url === "/health") return void res.end(JSON.stringify({ status: "ok", instance }));
      if (instance !== "this-instance") {
        res.statusCode = 401;
        return void res.end(JSON.stringify({ error: "Unauthorized" }));
      }
      res.end(JSON.stringify({ plugins: [] }));
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    try {
      const client = clientOf((server.address() as { port: number }).port);
      expect((await client.request("GET", "/plugins")).status).toBe(200);
      instance = "another-instance";
      await expect(client.request("GET", "/plugins")).rejects.toThrow(/is not this Stavrobot's/);
    } finally {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    }
  });
});

describe("startSibling", () => {
  it("stops the start instead of restarting a sibling whose first run found its port taken", async () => {
    const dir = mkdtempSync(join(tmpdir(), "stavrobot-sibling-"));
    dirs.push(dir);
    const entry = join(dir, "port-taken.mjs");
    writeFileSync(entry, `process.stderr.write("port taken\\n"); process.exit(${EXIT_IN_USE});\n`);
    const onPortInUse = vi.fn();
    const launched = startSibling({ name: "plugin-runner", entry, env: {}, onPortInUse }, silentLogger);
    await vi.waitUntil(() => onPortInUse.mock.calls.length > 0, { timeout: 10_000 });
    // Not restarted: it stays called once.
    await new Promise((resolve) => setTimeout(resolve, 1_500));
    expect(onPortInUse).toHaveBeenCalledTimes(1);
    await launched.stop();
  });
});

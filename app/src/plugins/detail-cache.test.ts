import { createServer, type Server } from "node:http";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { closeServer, createServiceClient, listen } from "@stavrobot/common";
import { ToolError } from "../tool-error.js";
import { PluginDetailCache } from "./detail-cache.js";

let server: Server;
let lookups: string[] = [];
let tools = ["a"];
let url: string;

beforeAll(async () => {
  server = createServer((req, res) => {
    lookups.push(req.url ?? "");
    if (req.url === "/bundles/missing") {
      res.writeHead(404, { "Content-Type": "application/json" }).end('{"error":"Bundle not found"}');
      return;
    }
    const detail = {
      name: "demo",
      description: "Demo",
      editable: false,
      permissions: ["*"],
      tools: tools.map((name) => ({ name, description: name, async: false, parameters: {} })),
    };
    res.writeHead(200, { "Content-Type": "application/json" }).end(JSON.stringify(detail));
  });
  url = `http://127.0.0.1:${await listen(server, 0)}`;
});
beforeEach(() => {
  lookups = [];
  tools = ["a"];
});
afterAll(() => closeServer(server));

describe("PluginDetailCache", () => {
  it("looks a plugin up once while fresh, again after forget, refresh or 30 s", async () => {
    let now = 1_000;
    const cache = new PluginDetailCache(createServiceClient({ baseUrl: url, retries: 0 }), () => now);
    await cache.get("demo");
    await cache.get("demo");
    expect(lookups).toHaveLength(1);
    tools = ["a", "b"];
    expect((await cache.get("demo", undefined, true)).tools.map((t) => t.name)).toEqual(["a", "b"]);
    cache.forget("demo");
    await cache.get("demo");
    now += 31_000;
    await cache.get("demo");
    expect(lookups).toHaveLength(4);
  });

  it("reports an unknown plugin as a tool error and does not cache it", async () => {
    const cache = new PluginDetailCache(createServiceClient({ baseUrl: url, retries: 0 }));
    await expect(cache.get("missing")).rejects.toThrow(new ToolError("Plugin 'missing' not found."));
    await expect(cache.get("missing")).rejects.toThrow(ToolError);
    expect(lookups).toEqual(["/bundles/missing", "/bundles/missing"]);
  });
});

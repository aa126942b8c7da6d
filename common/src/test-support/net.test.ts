import { createServer } from "node:net";
import { describe, expect, it } from "vitest";
import { FREE_PORT_RANGE, freePort } from "./net.js";

describe("freePort", () => {
  it("gives a port below the kernel's ephemeral ports that a server can then listen on", async () => {
    const port = await freePort();
    expect(port).toBeGreaterThanOrEqual(FREE_PORT_RANGE.low);
    expect(port).toBeLessThanOrEqual(FREE_PORT_RANGE.high);
    const server = createServer();
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen(port, "127.0.0.1", resolve);
    });
    await new Promise((resolve) => server.close(resolve));
  });

  it("gives parallel callers different ports", async () => {
    const ports = await Promise.all(Array.from({ length: 50 }, () => freePort()));
    expect(new Set(ports).size).toBeGreaterThan(45);
  });
});

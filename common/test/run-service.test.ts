import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, describe, expect, it, vi } from "vitest";
import type { ServiceProcess } from "../src/test-support/service-process.js";
import { spawnServiceProcess } from "../src/test-support/service-process.js";

const fixture = fileURLToPath(new URL("./fixtures/slow-service.ts", import.meta.url));
const SECRET = "skeleton-test-secret-0123456789";

/** The fixture service as a real process, with nothing of this process's environment but PATH. */
function start(env: Record<string, string>, stdin: "ignore" | "pipe" = "ignore"): Promise<ServiceProcess> {
  return spawnServiceProcess({ entry: fixture, env, cleanEnv: true, stdin });
}

describe("runService, the skeleton every sibling service stands on", () => {
  const dir = mkdtempSync(join(tmpdir(), "skeleton-"));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it("exits 78 naming the variable when the environment is wrong", async () => {
    const service = await start({ PORT: "not-a-port", STAVROBOT_INTERNAL_SECRET: SECRET, SLOW_MS: "-5" });
    expect(await service.exited).toBe(78);
    expect(service.log()).toContain("Invalid slow-service environment");
    expect(service.log()).toContain("PORT: ");
    expect(service.log()).toContain('got "not-a-port"');
    expect(service.log()).toContain("SLOW_MS: ");
  });

  it("waits for the secret file, keeps /health open and everything else behind the Bearer secret", async () => {
    const secretFile = join(dir, "internal-secret");
    const service = await start({ STAVROBOT_INTERNAL_SECRET_FILE: secretFile, SLOW_MS: "0" });
    const port = service.port;
    try {
      await vi.waitFor(
        () => expect(service.log()).toContain("waiting for the app to create the internal secret"),
        {
          timeout: 20_000,
        },
      );
      writeFileSync(secretFile, `${SECRET}\n`, { mode: 0o600 });
      expect(await service.healthy({ timeoutMs: 20_000 })).toEqual({ status: "ok", flavour: "slow" });
      const post = (auth?: string) =>
        fetch(`http://127.0.0.1:${port}/slow`, {
          method: "POST",
          headers: { "Content-Type": "application/json", ...(auth ? { Authorization: auth } : {}) },
          body: "{}",
        });
      expect((await post()).status).toBe(401);
      expect((await post("Bearer wrong-secret-wrong-secret")).status).toBe(401);
      expect((await post(`Basic ${Buffer.from(`x:${SECRET}`).toString("base64")}`)).status).toBe(401);
      expect((await post(`Bearer ${SECRET}`)).status).toBe(200);
      expect((await fetch(`http://127.0.0.1:${port}/nope`)).status).toBe(401);
    } finally {
      service.child.kill("SIGKILL");
    }
  });

  it("on SIGTERM finishes the requests in flight, refuses new ones, stops its domain and exits 0", async () => {
    const service = await start({ STAVROBOT_INTERNAL_SECRET: SECRET, SLOW_MS: "1500" });
    const port = service.port;
    await service.healthy({ timeoutMs: 20_000 });
    const inFlight = fetch(`http://127.0.0.1:${port}/slow`, {
      method: "POST",
      headers: { "Content-Type": "application/json", Authorization: `Bearer ${SECRET}` },
      body: "{}",
    });
    await vi.waitFor(() => expect(service.log()).toContain("slow request started"), 5_000);
    service.child.kill("SIGTERM");
    const answer = await inFlight;
    expect(answer.status).toBe(200);
    expect(await answer.json()).toEqual({ done: true });
    expect(await service.exited).toBe(0);
    expect(service.log()).toContain("domain stopped");
    await expect(fetch(`http://127.0.0.1:${port}/health`)).rejects.toThrow();
  });

  it("stops when the launcher that started it dies (its stdin closes)", async () => {
    const service = await start(
      { STAVROBOT_INTERNAL_SECRET: SECRET, STAVROBOT_EXIT_WITH_PARENT: "1" },
      "pipe",
    );
    await service.healthy({ timeoutMs: 20_000 });
    service.child.stdin?.end();
    expect(await service.exited).toBe(0);
  });
});

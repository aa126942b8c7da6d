import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { silentLogger } from "@stavrobot/common";
import { freePort, startFakeAnthropic, textTurn, type FakeLlmServer } from "@stavrobot/common/test-support";
import { startApp } from "../src/app.js";
import { acquireInstanceLock } from "../src/boot/instance-lock.js";
import { PASSWORD, configFor, createTestEnv, type TestEnv } from "./helpers/app.js";
import { asProcess, type Session } from "./helpers/cli.js";
import { startProduct, type Product } from "./helpers/product.js";

/**
 * `npm run chat` without STAVROBOT_URL finds the app `npm start` runs on another port, as the app
 * and `npm run doctor` find it: through the data directory's lock, or the PORT the app reads.
 */
let fake: FakeLlmServer;
let testEnv: TestEnv;
let app: Product;
let elsewhere: string;

beforeAll(async () => {
  fake = await startFakeAnthropic();
  testEnv = await createTestEnv(configFor(fake));
  // Listens on a free port (never 3000).
  app = await startProduct(testEnv);
  elsewhere = mkdtempSync(join(tmpdir(), "stavrobot-no-app-"));
}, 180_000);

afterAll(async () => {
  await app?.stop();
  await fake?.close();
  await testEnv?.cleanup();
  if (elsewhere) rmSync(elsewhere, { recursive: true, force: true });
});

async function ended(session: Session) {
  session.stdin.end();
  return { code: await session.exit, stdout: session.stdout(), stderr: session.stderr() };
}

describe("npm run chat finds the running app", () => {
  it("through the lock in DATA_DIR, where it listens on its own port", async () => {
    expect(app.port).not.toBe(3000);
    fake.enqueue(textTurn("Found you."));
    const r = await ended(
      asProcess(["-m", "hi"], { STAVROBOT_PASSWORD: PASSWORD, DATA_DIR: testEnv.env.DATA_DIR as string }),
    );
    expect(r).toEqual({ code: 0, stdout: "Found you.\n", stderr: "" });
  });

  it("through PORT, as the app reads it, where no app runs on DATA_DIR", async () => {
    fake.enqueue(textTurn("Here too."));
    const r = await ended(
      asProcess(["-m", "hi"], { STAVROBOT_PASSWORD: PASSWORD, DATA_DIR: elsewhere, PORT: String(app.port) }),
    );
    expect(r).toEqual({ code: 0, stdout: "Here too.\n", stderr: "" });
  });

  it("says how it chose the address it could not reach", async () => {
    const port = await freePort();
    const r = await ended(
      asProcess(["-m", "hi"], { STAVROBOT_PASSWORD: PASSWORD, DATA_DIR: elsewhere, PORT: String(port) }),
    );
    expect(r.code).toBe(3);
    expect(r.stderr).toBe(
      `Cannot reach http://127.0.0.1:${port} (ECONNREFUSED): nothing was sent. Is the app running (npm start) ` +
        "with this PORT? Set STAVROBOT_URL if it listens elsewhere.\n",
    );
  });
});

describe("npm run chat finds an app that listens on another address", () => {
  it("at the address its lock records (HOST)", async () => {
    const own = await createTestEnv(configFor(fake));
    const started = await startApp({
      // Another loopback address: what connects to 127.0.0.1 does not reach it.
      env: { ...own.env, HOST: "127.0.0.2" },
      logger: silentLogger,
      instanceLock: await acquireInstanceLock(own.dir),
    });
    try {
      fake.enqueue(textTurn("Over here."));
      const r = await ended(
        asProcess(["-m", "hi"], { STAVROBOT_PASSWORD: PASSWORD, DATA_DIR: own.env.DATA_DIR as string }),
      );
      expect(r).toEqual({ code: 0, stdout: "Over here.\n", stderr: "" });
    } finally {
      await started.close();
      await own.cleanup();
    }
  });
});

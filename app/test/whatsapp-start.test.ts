import { afterAll, beforeAll, expect, it, vi } from "vitest";
import { startFakeAnthropic, type FakeLlmServer } from "@stavrobot/common/test-support";
import { configFor, createTestEnv, type TestEnv } from "./helpers/app.js";
import { raw } from "./helpers/http.js";
import { startProduct, type Product } from "./helpers/product.js";

/** `npm start` with an empty `[whatsapp]`: the launcher runs the whatsapp-bridge bundle, and Home says it waits to be linked. */
let fake: FakeLlmServer;
let env: TestEnv;
let app: Product;

beforeAll(async () => {
  fake = await startFakeAnthropic();
  env = await createTestEnv(configFor(fake, "anthropic", `[whatsapp]\n`));
  app = await startProduct(env);
});

afterAll(async () => {
  await app?.stop();
  await fake?.close();
  await env?.cleanup();
});

it("npm start runs the whatsapp-bridge when [whatsapp] is set, and Home shows it unlinked", async () => {
  await vi.waitFor(
    async () => {
      const status = await raw(app.port, "GET", "/api/status");
      expect((status.json as { channels: { whatsapp: unknown } }).channels.whatsapp).toMatchObject({
        configured: true,
        bridgeOk: true,
        whatsapp: "unlinked",
      });
    },
    { timeout: 30_000 },
  );
  const page = await raw(app.port, "GET", "/api/settings/whatsapp");
  expect(page.json).toMatchObject({ whatsapp: "unlinked", hasQr: false });
});

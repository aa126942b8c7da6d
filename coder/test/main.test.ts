import { rmSync } from "node:fs";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { spawnServiceProcess, startServiceProcess } from "@stavrobot/common/test-support";
import { SECRET, makeTempRoot } from "./helpers.js";

const ENTRY = "coder/src/main.ts";

describe("main.ts as a real process", () => {
  const root = makeTempRoot("coder-main");
  afterAll(() => rmSync(root, { recursive: true, force: true }));

  it("serves /health openly, /code behind the Bearer secret, and exits 0 on SIGTERM", async () => {
    const service = await startServiceProcess({
      entry: ENTRY,
      env: {
        STAVROBOT_INTERNAL_SECRET: SECRET,
        PLUGINS_DIR: join(root, "plugins"),
        CODER_STATE_DIR: join(root, "state"),
        CODER_CREDENTIALS_DIR: join(root, "credentials"),
        CLAUDE_PATH: join(root, "no-claude-here"),
        ANTHROPIC_API_KEY: undefined,
      },
      timeoutMs: 20_000,
    });
    try {
      const health = await (await fetch(`${service.url}/health`)).json();
      expect(health).toMatchObject({ status: "ok", claude: false, auth: "subscription" });
      const body = JSON.stringify({ taskId: "task-00000001", plugin: "nope", message: "x" });
      const headers = { "Content-Type": "application/json" };
      expect((await fetch(`${service.url}/code`, { method: "POST", headers, body })).status).toBe(401);
      const authed = await fetch(`${service.url}/code`, {
        method: "POST",
        headers: { ...headers, Authorization: `Bearer ${SECRET}` },
        body,
      });
      expect(authed.status).toBe(400);
      expect(await authed.json()).toEqual({ error: 'Plugin "nope" does not exist.', kind: "invalid" });
    } finally {
      service.child.kill("SIGTERM");
    }
    expect(await service.exited).toBe(0);
    expect(service.log()).toContain("coder listening");
    expect(service.log()).toContain("the Claude Code CLI was not found");
  });

  it("exits 78 naming a bad variable", async () => {
    const service = await spawnServiceProcess({
      entry: ENTRY,
      env: { CODER_SANDBOX: "sometimes", STAVROBOT_INTERNAL_SECRET: SECRET },
    });
    expect(await service.exited).toBe(78);
    expect(service.log()).toContain("Invalid coder environment: CODER_SANDBOX");
  });
});

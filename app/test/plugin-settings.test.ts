import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { textTurn, toolTurn } from "@stavrobot/common/test-support";
import { chat, configFor, createTestEnv } from "./helpers/app.js";
import { raw, type RawResponse } from "./helpers/http.js";
import { freePort } from "./helpers/process.js";
import { startProduct } from "./helpers/product.js";
import { startAdminFixture, type AdminFixture } from "./browser/helpers/fixture.js";

/**
 * The owner's plugin API (`/api/settings/plugins/*`) over HTTP against the product (`npm start`:
 * the app and its plugin-runner) and a loopback git server, without a browser: what the admin UI
 * relies on, and what a script may use.
 */
const SECRET_VALUE = "sk-weather-API-SECRET-4242";
let t: AdminFixture;

const api = (
  method: string,
  path: string,
  body?: unknown,
  headers: Record<string, string> = {},
  port = t.app.port,
) =>
  raw(port, method, `/api/settings/plugins${path}`, {
    headers: { "Content-Type": "application/json", ...headers },
    ...(body === undefined ? {} : { body: typeof body === "string" ? body : JSON.stringify(body) }),
  });

/** The model asks to see the plugin: the tool result and the system prompt it gets. */
async function whatTheModelSees(): Promise<{ shown: string; system: string }> {
  t.fake.reset();
  t.fake.enqueue(toolTurn("manage_plugins", { action: "show", name: t.plugin }), textTurn("seen"));
  expect((await chat(t.app, "show me the weather plugin")).body.response).toBe("seen");
  return { shown: t.fake.requests[1]!.lastUserText, system: JSON.stringify(t.fake.requests[0]!.body.system) };
}

describe("the owner's plugin settings API", () => {
  beforeAll(async () => {
    t = await startAdminFixture();
  });

  afterAll(async () => {
    await t?.close();
  });

  it("needs the owner's password", async () => {
    const answer = await raw(t.app.port, "GET", "/api/settings/plugins/list", { auth: null });
    expect(answer.status).toBe(401);
  });

  it("installs as a job whose progress can be followed: cloning, init, done", async () => {
    const started = await api("POST", "/install", { url: t.repoUrl }, { Prefer: "respond-async" });
    expect(started.status).toBe(202);
    const jobId = started.json.jobId as string;
    const job = () => api("GET", `/jobs/${jobId}`);
    // The init script waits for its gate, so the job is seen in `init`.
    await vi.waitFor(async () => expect((await job()).json.state).toBe("init"), { timeout: 20_000 });
    t.releaseInit();
    let done: RawResponse | undefined;
    await vi.waitFor(
      async () => {
        done = await job();
        expect(done.json.state).toBe("done");
      },
      { timeout: 20_000 },
    );
    expect(done!.json.result.message).toContain(`Plugin "${t.plugin}" installed.`);
    expect(done!.json.output).toBe("weather data downloaded");
  });

  it("lists the plugin and shows its detail with every tool and its permissions", async () => {
    const list = await api("GET", "/list");
    expect(list.status).toBe(200);
    expect(JSON.stringify(list.json)).toContain(t.plugin);
    const detail = await api("GET", `/${t.plugin}/detail`);
    expect(detail.status).toBe(200);
    expect(JSON.stringify(detail.json)).toContain("forecast");
    expect(JSON.stringify(detail.json)).toContain("radar");
  });

  it("sets a secret that is reported as set and never given back", async () => {
    const before = await api("GET", `/${t.plugin}/config`);
    expect(before.json.configured).toEqual({ api_key: false, units: true });
    const set = await api("POST", "/configure", { name: t.plugin, config: { api_key: SECRET_VALUE } });
    expect(set.status).toBe(200);
    expect(set.text).not.toContain(SECRET_VALUE);
    const after = await api("GET", `/${t.plugin}/config`);
    expect(after.json.configured).toEqual({ api_key: true, units: true });
    for (const path of ["/list", `/${t.plugin}/detail`, `/${t.plugin}/config`]) {
      expect((await api("GET", path)).text).not.toContain(SECRET_VALUE);
    }
  });

  it("sets permissions the model cannot: a forbidden tool and a disabled plugin disappear for the model", async () => {
    const one = await api("POST", "/configure", { name: t.plugin, config: { permissions: ["forecast"] } });
    expect(one.status).toBe(200);
    expect((await api("GET", `/${t.plugin}/config`)).json.permissions).toEqual(["forecast"]);
    const oneTool = await whatTheModelSees();
    expect(oneTool.shown).toContain("forecast");
    expect(oneTool.shown).not.toContain("radar");

    await api("POST", "/configure", { name: t.plugin, config: { permissions: [] } });
    const disabled = await whatTheModelSees();
    expect(disabled.system).not.toContain(t.plugin);
    expect(disabled.shown).not.toContain("forecast");

    // The model's own configure cannot turn it back on.
    t.fake.reset();
    t.fake.enqueue(
      toolTurn("manage_plugins", {
        action: "configure",
        name: t.plugin,
        config: JSON.stringify({ permissions: ["*"] }),
      }),
      textTurn("tried"),
    );
    await chat(t.app, "enable every weather tool");
    expect(t.fake.requests[1]!.lastUserText).toContain("only the owner can choose which tools are enabled");
    expect((await api("GET", `/${t.plugin}/config`)).json.permissions).toEqual([]);

    await api("POST", "/configure", { name: t.plugin, config: { permissions: ["*"] } });
    expect((await whatTheModelSees()).shown).toContain("radar");
  });

  it("refuses bad input with a clear error", async () => {
    const notJson = await api("POST", "/configure", "{not json");
    expect(notJson.status).toBe(400);
    expect(notJson.json.error).toMatch(/Invalid JSON/);
    const extra = await api("POST", "/remove", { name: t.plugin, force: true });
    expect(extra.status).toBe(400);
    const badName = await api("POST", "/remove", { name: "../etc" });
    expect(badName.status).toBe(400);
    const badPermissions = await api("POST", "/configure", {
      name: t.plugin,
      config: { permissions: "everything" },
    });
    expect(badPermissions.status).toBe(400);
    const unknown = await api("GET", "/no-such-plugin/detail");
    expect(unknown.status).toBe(404);
    const hostileUrl = await api("POST", "/install", { url: "ext::sh -c touch% /tmp/pwned" });
    expect(hostileUrl.status).toBe(400);
    expect((await api("GET", "/jobs/not%20a%20job")).status).toBe(404);
    // Nothing changed.
    expect((await api("GET", `/${t.plugin}/config`)).json.configured.api_key).toBe(true);
  });

  it("updates and removes the plugin, keeping the secret across the update", async () => {
    const updated = await api("POST", "/update", { name: t.plugin });
    expect(updated.status).toBe(200);
    expect(updated.json.message).toContain(`Plugin "${t.plugin}" updated.`);
    expect((await api("GET", `/${t.plugin}/config`)).json.configured.api_key).toBe(true);
    const removed = await api("POST", "/remove", { name: t.plugin });
    expect(removed.status).toBe(200);
    expect((await api("GET", `/${t.plugin}/detail`)).status).toBe(404);
  });

  it("answers 502 when the plugin-runner is unreachable", async () => {
    // npm start's launcher restarts a plugin-runner that stops: this one is told the runner is
    // where nothing answers (as when it runs elsewhere and is down).
    const env = await createTestEnv(configFor(t.fake));
    const app = await startProduct(env, {
      env: { PLUGIN_RUNNER_URL: `http://127.0.0.1:${await freePort()}` },
    });
    try {
      const answer = await api("GET", "/list", undefined, {}, app.port);
      expect(answer.status).toBe(502);
      expect(answer.json.error).toBe("The plugin runner is unreachable.");
    } finally {
      await app.stop();
      await env.cleanup();
    }
  }, 120_000);
});

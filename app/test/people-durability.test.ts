import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { basicAuthHeader } from "@stavrobot/common";
import {
  FAKE_TELEGRAM_TOKEN,
  startFakeAnthropic,
  startFakeTelegram,
  textTurn,
  toolTurn,
  type FakeLlmServer,
  type FakeTelegram,
} from "@stavrobot/common/test-support";
import { PASSWORD, configFor, createTestEnv, post, type TestEnv } from "./helpers/app.js";
import { startAppProcess, type AppProcess } from "./helpers/process.js";

const OWNER = 1001;
const FRIEND = 2002;
const never = new Promise<never>(() => {});

describe("a subagent's turn survives kill -9 of the app", () => {
  let fake: FakeLlmServer;
  let telegram: FakeTelegram;
  let testEnv: TestEnv;
  let running: AppProcess | undefined;

  beforeAll(async () => {
    fake = await startFakeAnthropic();
    telegram = await startFakeTelegram();
    testEnv = await createTestEnv(
      configFor(
        fake,
        "anthropic",
        `[owner]\nname = "Ada"\ntelegram = ${OWNER}\n` +
          `[telegram]\nbotToken = "${FAKE_TELEGRAM_TOKEN}"\napiBaseUrl = "${telegram.url}"\n`,
      ),
    );
  });
  afterAll(async () => {
    await running?.stop("SIGKILL");
    await telegram?.close();
    await fake?.close();
    await testEnv?.cleanup();
  });

  it("runs again after restart, in the subagent's conversation, and answers the person", async () => {
    running = await startAppProcess(testEnv.env);
    const allowed = await fetch(`http://127.0.0.1:${running.port}/api/settings/allowlist`, {
      method: "PUT",
      headers: { "Content-Type": "application/json", Authorization: basicAuthHeader(PASSWORD) },
      body: JSON.stringify({ signal: [], telegram: [FRIEND], whatsapp: [], email: [] }),
    });
    expect(allowed.status).toBe(200);
    fake.enqueue(
      toolTurn("manage_agents", {
        action: "create",
        name: "friend helper",
        system_prompt: "You keep Friend company.",
        allowed_tools: ["send_telegram_message"],
      }),
      toolTurn("manage_interlocutors", {
        action: "create",
        display_name: "Friend",
        agent_id: 2,
        service: "telegram",
        identifier: String(FRIEND),
      }),
      textTurn("Ready."),
    );
    const setUp = await post(running.port, "/chat", { message: "set up Friend", source: "cli" });
    expect(setUp.body.response).toBe("Ready.");

    await vi.waitFor(() => expect(telegram.webhook).toBeDefined(), { timeout: 30_000 });
    const calls = fake.requests.length;
    fake.enqueue({ content: [{ type: "text", text: "never sent" }], gate: never });
    const answer = await telegram.deliverUpdate(telegram.textUpdate(FRIEND, "remember me"));
    expect(answer.status).toBe(200);
    await vi.waitFor(() => expect(fake.requests).toHaveLength(calls + 1), { timeout: 30_000 });
    await running.stop("SIGKILL");

    fake.enqueue(
      toolTurn("send_telegram_message", { recipient: "Friend", message: "Back, and I remember you." }),
      textTurn("Answered."),
    );
    running = await startAppProcess(testEnv.env);
    await vi.waitFor(
      () =>
        expect(
          telegram.sent
            .filter((sent) => String(sent.params.chat_id) === String(FRIEND))
            .map((sent) => sent.params.text),
        ).toEqual(["Back, and I remember you."]),
      { timeout: 30_000 },
    );
    const replayed = fake.requests[calls + 1];
    expect(JSON.stringify(replayed?.body.system)).toContain("You keep Friend company.");
    expect(replayed?.lastUserText).toContain("Text: remember me");
    // Its history holds the message once, and nothing of the owner's conversation.
    const body = JSON.stringify(replayed?.body.messages);
    expect(body.split("Text: remember me").length - 1).toBe(1);
    expect(body).not.toContain("set up Friend");
    // Nothing was told to the owner.
    expect(telegram.sent.filter((sent) => String(sent.params.chat_id) === String(OWNER))).toEqual([]);
  });
});

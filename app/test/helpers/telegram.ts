import { afterAll, beforeAll, beforeEach, expect, vi } from "vitest";
import {
  FAKE_TELEGRAM_TOKEN,
  freePort,
  parseTelegramHtml,
  startFakeAnthropic,
  startFakeTelegram,
  type FakeTelegram,
} from "@stavrobot/common/test-support";
import { configFor, createTestEnv, put, quiet, startTestApp, type AppFixture } from "./app.js";

// Private chats, whose ids are their users' ids: the owner, a friend on the allowlist, and
// someone nobody allowed.
export const OWNER = 1001;
export const FRIEND = 2002;
export const STRANGER = 3003;

export interface TelegramFixture extends AppFixture {
  telegram: FakeTelegram;
  /** Messages the fake Bot API received for one chat since `from`, as a client shows them. */
  shown(chatId: number, from?: number): string[];
  /** Delivers an update and waits for the turn it starts, and what it sends, to finish. */
  deliver(update: object): Promise<void>;
}

/**
 * For a test file: the app on a fake Bot API (its webhook reachable at the public address it
 * registers), the owner on Telegram, and a friend on the allowlist with an agent of their own.
 * Fields are filled in by the time the tests run.
 */
export function useTelegramApp(): TelegramFixture {
  const fixture = {} as TelegramFixture;
  fixture.shown = (chatId, from = 0) =>
    fixture.telegram.sent
      .slice(from)
      .filter((sent) => String(sent.params.chat_id) === String(chatId))
      .map((sent) => {
        const text = String(sent.params.text ?? sent.params.caption ?? "");
        return sent.params.parse_mode === "HTML" ? parseTelegramHtml(text) : text;
      });
  fixture.deliver = async (update) => {
    const answer = await fixture.telegram.deliverUpdate(update);
    expect(answer).toEqual({ status: 200, body: { ok: true } });
    await quiet(fixture.app);
  };

  beforeAll(async () => {
    fixture.fake = await startFakeAnthropic();
    fixture.telegram = await startFakeTelegram();
    const port = await freePort();
    const channels =
      `[owner]\nname = "Ada"\ntelegram = ${OWNER}\n` +
      `[telegram]\nbotToken = "${FAKE_TELEGRAM_TOKEN}"\napiBaseUrl = "${fixture.telegram.url}"\n`;
    // Top-level keys go before the first table.
    const config = configFor(fixture.fake, "anthropic", channels).replace(
      /^\[queue\]/m,
      `publicHostname = "http://127.0.0.1:${port}"\n[queue]`,
    );
    fixture.env = await createTestEnv(config);
    fixture.env.env.PORT = String(port);
    fixture.app = await startTestApp(fixture.env);
    const saved = await put(fixture.app.port, "/api/settings/allowlist", {
      signal: [],
      telegram: [FRIEND],
      whatsapp: [],
      email: [],
    });
    expect(saved.status).toBe(200);
    // The friend talks to an agent of their own (a stranger's message would reach nobody).
    await fixture.app.db.query(
      `WITH agent AS (
         INSERT INTO agents (name, system_prompt, allowed_tools)
         VALUES ('friend helper', 'Keep the friend company.', '{send_telegram_message}') RETURNING id),
       person AS (
         INSERT INTO interlocutors (display_name, agent_id) SELECT 'Friend', id FROM agent RETURNING id)
       INSERT INTO interlocutor_identities (interlocutor_id, service, identifier) SELECT id, 'telegram', $1 FROM person`,
      [String(FRIEND)],
    );
    // Updates are delivered to the webhook the app registers at start: any test may come first.
    await vi.waitFor(() => expect(fixture.telegram.webhook).toBeDefined());
  });

  afterAll(async () => {
    await fixture.app?.close();
    await fixture.telegram?.close();
    await fixture.fake?.close();
    await fixture.env?.cleanup();
  });

  // Every test starts with nothing in flight, so what it sees was caused by it.
  beforeEach(() => quiet(fixture.app));

  return fixture;
}

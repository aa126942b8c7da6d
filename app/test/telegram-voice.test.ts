import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { silentLogger } from "@stavrobot/common";
import {
  FAKE_TELEGRAM_TOKEN,
  freePort,
  startFakeAnthropic,
  startFakeOpenAiAudio,
  startFakeTelegram,
  textTurn,
  type FakeLlmServer,
  type FakeOpenAiAudio,
  type FakeTelegram,
} from "@stavrobot/common/test-support";
import { startApp, type RunningApp } from "../src/app.js";
import { configFor, createTestEnv, quiet, type TestEnv } from "./helpers/app.js";

/**
 * Speech to text of Telegram voice notes: the real webhook, getFile from a fake Bot API, and the
 * transcription from a fake of OpenAI's audio API, with `[stt]` configured.
 */
const OWNER = 1001;

let fake: FakeLlmServer;
let telegram: FakeTelegram;
let audio: FakeOpenAiAudio;
let env: TestEnv;
let app: RunningApp;

beforeAll(async () => {
  fake = await startFakeAnthropic();
  telegram = await startFakeTelegram();
  audio = await startFakeOpenAiAudio();
  const port = await freePort();
  const sections =
    `[owner]\nname = "Ada"\ntelegram = ${OWNER}\n` +
    `[telegram]\nbotToken = "${FAKE_TELEGRAM_TOKEN}"\napiBaseUrl = "${telegram.url}"\n` +
    `[stt]\napiKey = "sk-stt-test"\nmodel = "gpt-4o-transcribe"\nbaseUrl = "${audio.url}"\n`;
  // Top-level keys go before the first table.
  const config = configFor(fake, "anthropic", sections).replace(
    /^\[queue\]/m,
    `publicHostname = "http://127.0.0.1:${port}"\n[queue]`,
  );
  env = await createTestEnv(config);
  env.env.PORT = String(port);
  app = await startApp({ env: env.env, logger: silentLogger });
  await vi.waitFor(() => expect(telegram.webhook).toBeDefined());
});

afterAll(async () => {
  await app?.close();
  await telegram?.close();
  await audio?.close();
  await fake?.close();
  await env?.cleanup();
});

/** Delivers an update and waits until its turn is over and its answer sent. */
async function deliver(update: object): Promise<void> {
  expect(await telegram.deliverUpdate(update)).toEqual({ status: 200, body: { ok: true } });
  await quiet(app);
}

describe("a Telegram voice note with [stt] configured", () => {
  it("is transcribed: the transcript is the message text and the audio stays attached", async () => {
    const voice = Buffer.concat([Buffer.from("OggS\0\x02"), Buffer.alloc(40, 3)]);
    telegram.addFile("voice-42", voice, "voice/file_42.oga");
    audio.setTranscript("remind me to water the tomatoes at six");
    fake.enqueue(textTurn("I will remind you at six."));
    const calls = fake.requests.length;
    const sent = telegram.sent.length;
    await deliver(telegram.voiceUpdate(OWNER, "voice-42"));

    const [call] = audio.transcriptions;
    expect(call?.data).toEqual(voice);
    expect(call?.fileName).toMatch(/\.ogg$/);
    expect(call?.fields).toMatchObject({ model: "gpt-4o-transcribe" });
    expect(call?.headers.authorization).toBe("Bearer sk-stt-test");
    const told = fake.requests[calls]?.lastUserText ?? "";
    expect(told).toContain("Source: telegram");
    expect(told).toContain("Text: remind me to water the tomatoes at six");
    expect(told).toMatch(/A file was received: voice-voice-42\.ogg \(audio\/ogg, \d+ bytes\), stored at /);
    // The answer goes back to the chat the voice note came from.
    const answers = telegram.sent
      .slice(sent)
      .filter((message) => String(message.params.chat_id) === String(OWNER));
    expect(answers.map((message) => message.params.text)).toEqual(["I will remind you at six."]);
  });

  it("tells the model when the transcription fails, and still answers", async () => {
    telegram.addFile("voice-43", Buffer.from("OggS broken"), "voice/file_43.oga");
    audio.failNext("transcriptions", {
      status: 400,
      message: "Audio file might be corrupted or unsupported",
    });
    fake.enqueue(textTurn("Sorry, I could not hear that."));
    const calls = fake.requests.length;
    await deliver(telegram.voiceUpdate(OWNER, "voice-43"));
    const told = fake.requests[calls]?.lastUserText ?? "";
    expect(told).toContain(
      "Text: [Voice note could not be transcribed: the provider answered HTTP 400 " +
        "(Audio file might be corrupted or unsupported).]",
    );
    expect(told).toMatch(/A file was received: voice-voice-43\.ogg \(audio\/ogg/);
  });
});

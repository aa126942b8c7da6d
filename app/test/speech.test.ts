import { execFileSync } from "node:child_process";
import {
  existsSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  truncateSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import type { AgentToolResult } from "@mariozechner/pi-agent-core";
import { FAKE_MP3, freePort, onPath, requires, startFakeOpenAiAudio } from "@stavrobot/common/test-support";
import type { FakeOpenAiAudio } from "@stavrobot/common/test-support";
import { createTranscriber } from "../src/media/stt.js";
import type { TranscriberDeps } from "../src/media/stt.js";
import { ToolError } from "../src/tools/result.js";
import { createTextToSpeechTool } from "../src/tools/text-to-speech.js";

const KEY = "sk-openai-test";
/** Converting voice notes uses Debian's ffmpeg when it is installed (CI installs it). */
const hasFfmpeg = requires(
  "converting audio with the real ffmpeg: ffmpeg is not installed",
  onPath("ffmpeg"),
);

function text(result: AgentToolResult<unknown>): string {
  return result.content.map((part) => (part.type === "text" ? part.text : "")).join("");
}

let audio: FakeOpenAiAudio;
let dir: string;
beforeAll(async () => {
  audio = await startFakeOpenAiAudio();
  dir = mkdtempSync(join(tmpdir(), "stavrobot-speech-test-"));
});
afterAll(async () => {
  await audio.close();
  rmSync(dir, { recursive: true, force: true });
});
beforeEach(() => {
  audio.speech.length = 0;
  audio.transcriptions.length = 0;
});

describe("text_to_speech", () => {
  const tts = (model: string, filesDir: string) =>
    createTextToSpeechTool({
      apiKey: KEY,
      model,
      voice: "nova",
      instructions: "Sound cheerful.",
      baseUrl: audio.url,
      filesDir,
    });

  it("writes the mp3 into the workspace, owner-only, and reports its path", async () => {
    const filesDir = join(dir, "files-a");
    const result = await tts("gpt-4o-mini-tts", filesDir).execute("id", { text: "Hello there." });
    const match = /^Audio written to (.+) \((\d+) bytes\)\.$/.exec(text(result));
    const path = match?.[1] ?? "";
    expect(path).toMatch(new RegExp(`^${filesDir}/workspace/speech-\\d{14}-[0-9a-f]{8}\\.mp3$`));
    expect(Number(match?.[2])).toBe(FAKE_MP3.length);
    expect(readFileSync(path)).toEqual(FAKE_MP3);
    expect(statSync(path).mode & 0o777).toBe(0o600);
    expect(result.details).toEqual({ path, bytes: FAKE_MP3.length });
    expect(audio.speech[0]?.headers.authorization).toBe(`Bearer ${KEY}`);
    expect(audio.speech[0]?.body).toEqual({
      model: "gpt-4o-mini-tts",
      input: "Hello there.",
      voice: "nova",
      instructions: "Sound cheerful.",
      response_format: "mp3",
    });
  });

  it("does not send instructions to the tts-1 models", async () => {
    await tts("tts-1-hd", join(dir, "files-b")).execute("id", { text: "Hi." });
    expect(audio.speech[0]?.body).not.toHaveProperty("instructions");
  });

  it("turns a provider error into a tool error with the provider's message, and writes nothing", async () => {
    const filesDir = join(dir, "files-c");
    audio.failNext("speech", { status: 401, message: "Incorrect API key provided: sk-op***test." });
    const call = tts("gpt-4o-mini-tts", filesDir).execute("id", { text: "Hello." });
    await expect(call).rejects.toBeInstanceOf(ToolError);
    await expect(call).rejects.toThrow(
      "Text to speech failed: the provider answered HTTP 401 (Incorrect API key provided: sk-op***test.).",
    );
    expect(existsSync(join(filesDir, "workspace"))).toBe(false);
  });

  it("refuses text over the endpoint's limit without calling it", async () => {
    await expect(
      tts("tts-1", join(dir, "files-d")).execute("id", { text: "a".repeat(4097) }),
    ).rejects.toThrow("The text is 4097 characters; text_to_speech takes at most 4096.");
    expect(audio.speech).toHaveLength(0);
  });
});

describe("speech to text", () => {
  const transcriber = (deps: Partial<TranscriberDeps> = {}) =>
    createTranscriber({ apiKey: KEY, model: "gpt-4o-transcribe", baseUrl: audio.url, ...deps });
  const file = (name: string, data: Buffer) => {
    const path = join(dir, name);
    writeFileSync(path, data);
    return path;
  };
  const OGG = Buffer.concat([Buffer.from("OggS\0\x02"), Buffer.alloc(64, 7)]);

  it("sends an Ogg voice note as it is, named so the API knows its format", async () => {
    const path = file("telegram-voice", OGG);
    const result = await transcriber({ ffmpegPath: null }).transcribe({
      path,
      mimeType: "audio/ogg; codecs=opus",
      filename: "file_17",
    });
    expect(result).toEqual({ text: "hello from the fake" });
    const [call] = audio.transcriptions;
    expect(call?.fileName).toBe("file_17.ogg");
    expect(call?.data).toEqual(OGG);
    expect(call?.fields).toMatchObject({ model: "gpt-4o-transcribe", response_format: "json" });
    expect(call?.headers.authorization).toBe(`Bearer ${KEY}`);
  });

  it("goes by the extension when the type says nothing (.oga is sent as .ogg)", async () => {
    const path = file("note.oga", OGG);
    await transcriber().transcribe({ path, mimeType: "application/octet-stream", filename: "note.oga" });
    expect(audio.transcriptions[0]?.fileName).toBe("note.ogg");
  });

  it.runIf(hasFfmpeg)("converts AAC to mp3 with the real ffmpeg and sends the mp3", async () => {
    const aac = join(dir, "voice.aac");
    execFileSync("ffmpeg", [
      ...["-hide_banner", "-loglevel", "error", "-y", "-f", "lavfi", "-i", "sine=frequency=440:duration=0.5"],
      ...["-c:a", "aac", "-f", "adts", aac],
    ]);
    const before = readdirSync(tmpdir()).filter((name) => name.startsWith("stavrobot-stt-"));
    // No ffmpegPath: the transcriber finds ffmpeg on PATH (installed on this machine).
    const result = await transcriber().transcribe({
      path: aac,
      mimeType: "audio/aac",
      filename: "voice.aac",
    });
    expect(result).toEqual({ text: "hello from the fake" });
    const [call] = audio.transcriptions;
    expect(call?.fileName).toBe("voice.mp3");
    expect(call?.mimeType).toBe("audio/mpeg");
    const data = call?.data ?? Buffer.alloc(0);
    const id3 = data.subarray(0, 3).toString("latin1") === "ID3";
    const frameSync = data[0] === 0xff && ((data[1] ?? 0) & 0xe0) === 0xe0;
    expect(id3 || frameSync).toBe(true);
    expect(data.equals(readFileSync(aac))).toBe(false);
    // The temporary conversion directory is gone.
    expect(readdirSync(tmpdir()).filter((name) => name.startsWith("stavrobot-stt-"))).toEqual(before);
  });

  it("refuses a format it would have to convert when ffmpeg is not available", async () => {
    const path = file("voice.amr", Buffer.from("#!AMR\n0000"));
    const result = await transcriber({ ffmpegPath: null }).transcribe({
      path,
      mimeType: "audio/amr",
      filename: "voice.amr",
    });
    expect(result).toEqual({
      error:
        "ffmpeg is not installed, so audio/amr cannot be converted to a format the transcription service " +
        "takes (flac, mp3, mp4, mpeg, mpga, m4a, ogg, wav, webm).",
    });
    expect(audio.transcriptions).toHaveLength(0);
  });

  it.runIf(hasFfmpeg)("says so when ffmpeg cannot convert the file", async () => {
    const path = file("broken.aac", Buffer.from("this is not audio at all"));
    const result = await transcriber().transcribe({ path, mimeType: "audio/aac", filename: "broken.aac" });
    expect(result).toMatchObject({
      error: expect.stringMatching(/^ffmpeg could not convert audio\/aac \(.+\)\.$/),
    });
    expect(audio.transcriptions).toHaveLength(0);
  });

  it("returns provider errors, an unreachable provider and unreadable or oversized files as {error}", async () => {
    const path = file("voice.ogg", OGG);
    audio.failNext("transcriptions", {
      status: 400,
      message: "Audio file might be corrupted or unsupported",
    });
    await expect(
      transcriber().transcribe({ path, mimeType: "audio/ogg", filename: "voice.ogg" }),
    ).resolves.toEqual({
      error: "the provider answered HTTP 400 (Audio file might be corrupted or unsupported).",
    });
    const closed = `http://127.0.0.1:${await freePort()}/v1`;
    await expect(
      transcriber({ baseUrl: closed }).transcribe({ path, mimeType: "audio/ogg", filename: "voice.ogg" }),
    ).resolves.toMatchObject({
      error: expect.stringContaining("could not reach the provider"),
    });
    const big = file("big.ogg", Buffer.alloc(0));
    truncateSync(big, 26 * 1024 * 1024);
    await expect(
      transcriber().transcribe({ path: big, mimeType: "audio/ogg", filename: "big.ogg" }),
    ).resolves.toEqual({
      error: "the audio is 26.0 MB; the transcription service takes at most 25 MB.",
    });
    await expect(
      transcriber().transcribe({ path: join(dir, "gone.ogg"), mimeType: "audio/ogg", filename: "gone.ogg" }),
    ).resolves.toMatchObject({
      error: expect.stringContaining("the audio could not be read"),
    });
    expect(audio.transcriptions).toHaveLength(1);
  });

  it("reports silence as an error rather than an empty transcript", async () => {
    audio.setTranscript("  ");
    const path = file("quiet.ogg", OGG);
    await expect(
      transcriber().transcribe({ path, mimeType: "audio/ogg", filename: "quiet.ogg" }),
    ).resolves.toEqual({
      error: "no speech was recognised.",
    });
    audio.setTranscript("hello from the fake");
  });
});

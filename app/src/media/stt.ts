import { accessSync, constants } from "node:fs";
import { mkdtemp, readFile, rm, stat } from "node:fs/promises";
import { tmpdir } from "node:os";
import { basename, delimiter, extname, join } from "node:path";
import { runProcess } from "@stavrobot/common";
import { describeFetchFailure, describeOpenAiError } from "./openai-error.js";

/** The transcription endpoint's upload limit. */
export const MAX_AUDIO_BYTES = 25 * 1024 * 1024;

/** What the API takes, as the file extension it recognises the format by. */
const FORMAT_BY_MIME: Record<string, string> = {
  "audio/flac": "flac",
  "audio/x-flac": "flac",
  "audio/mpeg": "mp3",
  "audio/mp3": "mp3",
  "audio/mpga": "mpga",
  "audio/mp4": "m4a",
  "audio/m4a": "m4a",
  "audio/x-m4a": "m4a",
  "video/mp4": "mp4",
  "audio/ogg": "ogg",
  "audio/opus": "ogg",
  "application/ogg": "ogg",
  "audio/wav": "wav",
  "audio/x-wav": "wav",
  "audio/wave": "wav",
  "audio/vnd.wave": "wav",
  "audio/webm": "webm",
  "video/webm": "webm",
};
/** Extensions of those formats; Ogg files also come as .oga and .opus. */
const FORMAT_BY_EXTENSION: Record<string, string> = {
  flac: "flac",
  mp3: "mp3",
  mp4: "mp4",
  mpeg: "mpeg",
  mpga: "mpga",
  m4a: "m4a",
  ogg: "ogg",
  oga: "ogg",
  opus: "ogg",
  wav: "wav",
  webm: "webm",
};
const FORMAT_NAMES = "flac, mp3, mp4, mpeg, mpga, m4a, ogg, wav, webm";

export interface AudioFile {
  path: string;
  mimeType: string;
  filename: string;
}

export type TranscriptionResult = { text: string } | { error: string };

export interface Transcriber {
  /**
   * Never throws: a failure comes back as `{error}`, a sentence that reads well after
   * "Voice note could not be transcribed: ".
   */
  transcribe(file: AudioFile): Promise<TranscriptionResult>;
}

export interface TranscriberDeps {
  apiKey: string;
  /** e.g. "gpt-4o-transcribe" or "whisper-1". */
  model: string;
  /** Default https://api.openai.com/v1. */
  baseUrl?: string;
  /** null: not available. Default: "ffmpeg" from PATH when it is there. */
  ffmpegPath?: string | null;
  fetch?: typeof fetch;
  timeoutMs?: number;
  /** For an ffmpeg conversion. Default 120 s. */
  convertTimeoutMs?: number;
}

/**
 * Speech to text through OpenAI's `/audio/transcriptions`. Formats the API takes are sent as
 * they are (named with the extension the API recognises them by); others, such as AAC or AMR
 * voice notes, are converted to mp3 with ffmpeg first when it is installed.
 */
export function createTranscriber(deps: TranscriberDeps): Transcriber {
  const baseUrl = (deps.baseUrl ?? "https://api.openai.com/v1").replace(/\/+$/, "");
  const ffmpeg = deps.ffmpegPath === undefined ? findOnPath("ffmpeg") : deps.ffmpegPath;
  const timeoutMs = deps.timeoutMs ?? 300_000;
  const doFetch = deps.fetch ?? fetch;

  async function send(data: Buffer, filename: string, mimeType: string): Promise<TranscriptionResult> {
    if (data.length > MAX_AUDIO_BYTES) return { error: tooLarge(data.length) };
    const form = new FormData();
    form.append("file", new Blob([data], { type: mimeType }), filename);
    form.append("model", deps.model);
    form.append("response_format", "json");
    const timeout = AbortSignal.timeout(timeoutMs);
    let response: Response;
    let body: string;
    try {
      response = await doFetch(`${baseUrl}/audio/transcriptions`, {
        method: "POST",
        headers: { authorization: `Bearer ${deps.apiKey}` },
        body: form,
        signal: timeout,
      });
      body = await response.text();
    } catch (error) {
      return { error: describeFetchFailure(error, timeout.aborted, timeoutMs) };
    }
    if (!response.ok) return { error: describeOpenAiError(response.status, body) };
    let text: unknown;
    try {
      text = (JSON.parse(body) as { text?: unknown }).text;
    } catch {
      return { error: "the provider's answer was not JSON." };
    }
    if (typeof text !== "string") return { error: "the provider's answer had no text." };
    return text.trim() ? { text: text.trim() } : { error: "no speech was recognised." };
  }

  async function convertAndSend(file: AudioFile, mimeType: string): Promise<TranscriptionResult> {
    if (!ffmpeg) {
      return {
        error:
          `ffmpeg is not installed, so ${mimeType || "this audio"} cannot be converted to a format the ` +
          `transcription service takes (${FORMAT_NAMES}).`,
      };
    }
    const dir = await mkdtemp(join(tmpdir(), "stavrobot-stt-"));
    try {
      const out = join(dir, "audio.mp3");
      const result = await runProcess({
        command: ffmpeg,
        args: ["-nostdin", "-hide_banner", "-loglevel", "error", "-i", file.path, "-vn", "-f", "mp3", out],
        cwd: dir,
        env: { PATH: process.env.PATH ?? "/usr/bin:/bin" },
        timeoutMs: deps.convertTimeoutMs ?? 120_000,
        stdoutLimitBytes: 4096,
        stderrLimitBytes: 4096,
      });
      if (result.spawnError) return { error: `ffmpeg could not be started (${result.spawnError}).` };
      if (result.timedOut) return { error: `converting ${mimeType} with ffmpeg took too long.` };
      if (result.exitCode !== 0) {
        const why = result.stderr.trim().split("\n").at(-1) || `exit code ${result.exitCode}`;
        return { error: `ffmpeg could not convert ${mimeType || "the audio"} (${why}).` };
      }
      const name = `${basename(file.filename, extname(file.filename)) || "voice"}.mp3`;
      return await send(await readFile(out), name, "audio/mpeg");
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  }

  return {
    async transcribe(file) {
      try {
        const size = (await stat(file.path)).size;
        if (size > MAX_AUDIO_BYTES) return { error: tooLarge(size) };
        const mimeType = file.mimeType.split(";")[0]?.trim().toLowerCase() ?? "";
        const extension = extname(file.filename).slice(1).toLowerCase();
        // A specific MIME type the API does not take wins over the name (AAC named .m4a is still
        // AAC); the extension decides when the type says nothing, or when there is no converter.
        const vague = !mimeType || mimeType === "application/octet-stream" || !ffmpeg;
        const format = FORMAT_BY_MIME[mimeType] ?? (vague ? FORMAT_BY_EXTENSION[extension] : undefined);
        if (!format) return await convertAndSend(file, mimeType);
        // The API recognises the format by the file name, so the name must carry the right extension.
        const name = `${basename(file.filename, extname(file.filename)) || "voice"}.${format}`;
        return await send(await readFile(file.path), name, mimeType || "application/octet-stream");
      } catch (error) {
        return {
          error: `the audio could not be read (${error instanceof Error ? error.message : String(error)}).`,
        };
      }
    },
  };
}

function tooLarge(bytes: number): string {
  const mb = (bytes / (1024 * 1024)).toFixed(1);
  return `the audio is ${mb} MB; the transcription service takes at most 25 MB.`;
}

/** The full path of an executable on PATH, or null. */
export function findOnPath(command: string): string | null {
  for (const dir of (process.env.PATH ?? "").split(delimiter)) {
    if (!dir) continue;
    const candidate = join(dir, command);
    try {
      accessSync(candidate, constants.X_OK);
      return candidate;
    } catch {
      // Not here.
    }
  }
  return null;
}

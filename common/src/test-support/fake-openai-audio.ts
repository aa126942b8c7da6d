import { createServer } from "node:http";
import type { IncomingMessage, ServerResponse } from "node:http";
import { listen } from "../http/serve.js";
import { isRecord, sendJson } from "./fake-llm.js";
import { readMultipart } from "./multipart.js";

/**
 * A fake of OpenAI's audio API: `POST /v1/audio/speech` (JSON in, audio bytes out) and
 * `POST /v1/audio/transcriptions` (multipart in, `{text}` out). It checks what the real API
 * checks first (Bearer key, required fields, a file name with a supported extension), answers
 * errors in OpenAI's `{"error": {message, type, param, code}}` shape, and records every request.
 */

/** What the fake speech endpoint returns: an ID3 header and one MPEG audio frame header. */
export const FAKE_MP3 = Buffer.concat([
  Buffer.from("ID3\x04\x00\x00\x00\x00\x00\x00", "latin1"),
  Buffer.from([0xff, 0xfb, 0x90, 0x64]),
  Buffer.alloc(413),
]);

/** Extensions the real transcription endpoint accepts. */
export const TRANSCRIPTION_FORMATS = [
  "flac",
  "m4a",
  "mp3",
  "mp4",
  "mpeg",
  "mpga",
  "oga",
  "ogg",
  "wav",
  "webm",
];

export interface SpeechCall {
  headers: Record<string, string | string[] | undefined>;
  body: Record<string, unknown>;
}

export interface TranscriptionCall {
  headers: Record<string, string | string[] | undefined>;
  fields: Record<string, string>;
  fileName: string;
  mimeType: string;
  data: Buffer;
}

export interface OpenAiErrorAnswer {
  status: number;
  message: string;
  type?: string;
  code?: string | null;
}

export interface FakeOpenAiAudio {
  /** Base URL including "/v1", as OpenAI clients take it. */
  url: string;
  speech: SpeechCall[];
  transcriptions: TranscriptionCall[];
  /** The text the next transcriptions answer (default "hello from the fake"). */
  setTranscript(text: string): void;
  /** The next call of that endpoint fails with this error; queue several for several calls. */
  failNext(endpoint: "speech" | "transcriptions", answer: OpenAiErrorAnswer): void;
  close(): Promise<void>;
}

function sendError(res: ServerResponse, answer: OpenAiErrorAnswer): void {
  const type = answer.type ?? (answer.status >= 500 ? "server_error" : "invalid_request_error");
  sendJson(res, answer.status, {
    error: { message: answer.message, type, param: null, code: answer.code ?? null },
  });
}

async function readAll(req: IncomingMessage): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}

/** The form's fields and its (last) `file`, or undefined without one. */
async function readUpload(req: IncomingMessage): Promise<Omit<TranscriptionCall, "headers"> | undefined> {
  const { fields, files } = await readMultipart(req);
  const file = files.filter((candidate) => candidate.field === "file").at(-1);
  return file && { fields, fileName: file.fileName, mimeType: file.mimeType, data: file.data };
}

export async function startFakeOpenAiAudio(): Promise<FakeOpenAiAudio> {
  const speech: SpeechCall[] = [];
  const transcriptions: TranscriptionCall[] = [];
  const failures: Record<"speech" | "transcriptions", OpenAiErrorAnswer[]> = {
    speech: [],
    transcriptions: [],
  };
  let transcript = "hello from the fake";

  async function answerSpeech(req: IncomingMessage, res: ServerResponse): Promise<void> {
    let body: unknown;
    try {
      body = JSON.parse((await readAll(req)).toString("utf8"));
    } catch {
      return sendError(res, { status: 400, message: "We could not parse the JSON body of your request." });
    }
    if (!isRecord(body)) return sendError(res, { status: 400, message: "The body must be a JSON object." });
    speech.push({ headers: { ...req.headers }, body });
    const failure = failures.speech.shift();
    if (failure) return sendError(res, failure);
    for (const field of ["model", "input", "voice"]) {
      if (typeof body[field] !== "string" || body[field] === "") {
        return sendError(res, { status: 400, message: `Missing required parameter: '${field}'.` });
      }
    }
    if (String(body.input).length > 4096) {
      return sendError(res, {
        status: 400,
        message: "string too long. Expected a string with maximum length 4096.",
      });
    }
    res.writeHead(200, { "content-type": "audio/mpeg", "content-length": FAKE_MP3.length });
    res.end(FAKE_MP3);
  }

  async function answerTranscription(req: IncomingMessage, res: ServerResponse): Promise<void> {
    if (!(req.headers["content-type"] ?? "").startsWith("multipart/form-data")) {
      req.resume();
      return sendError(res, { status: 400, message: "Content-Type must be multipart/form-data." });
    }
    const upload = await readUpload(req);
    if (!upload) return sendError(res, { status: 400, message: "Missing required parameter: 'file'." });
    transcriptions.push({ headers: { ...req.headers }, ...upload });
    const failure = failures.transcriptions.shift();
    if (failure) return sendError(res, failure);
    if (!upload.fields.model)
      return sendError(res, { status: 400, message: "Missing required parameter: 'model'." });
    const extension = upload.fileName.split(".").at(-1)?.toLowerCase() ?? "";
    if (!upload.fileName.includes(".") || !TRANSCRIPTION_FORMATS.includes(extension)) {
      const list = TRANSCRIPTION_FORMATS.map((f) => `'${f}'`).join(", ");
      return sendError(res, { status: 400, message: `Invalid file format. Supported formats: [${list}]` });
    }
    if (upload.fields.response_format === "text") {
      res.writeHead(200, { "content-type": "text/plain" });
      res.end(transcript);
      return;
    }
    sendJson(res, 200, { text: transcript });
  }

  const server = createServer((req, res) => {
    const path = new URL(req.url ?? "/", "http://localhost").pathname;
    if (!/^Bearer \S+/.test(req.headers.authorization ?? "")) {
      req.resume();
      const message =
        "You didn't provide an API key. You need to provide your API key in an Authorization header.";
      sendError(res, { status: 401, message });
      return;
    }
    const route =
      req.method === "POST" && path === "/v1/audio/speech"
        ? answerSpeech
        : req.method === "POST" && path === "/v1/audio/transcriptions"
          ? answerTranscription
          : undefined;
    if (!route) {
      req.resume();
      sendError(res, { status: 404, message: `Invalid URL (${req.method} ${path})` });
      return;
    }
    route(req, res).catch(() => res.destroy());
  });
  const port = await listen(server, 0);
  return {
    url: `http://127.0.0.1:${port}/v1`,
    speech,
    transcriptions,
    setTranscript: (text) => void (transcript = text),
    failNext: (endpoint, answer) => void failures[endpoint].push(answer),
    close: () =>
      new Promise((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

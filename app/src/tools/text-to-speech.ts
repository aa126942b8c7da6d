import { randomBytes } from "node:crypto";
import { mkdir, writeFile } from "node:fs/promises";
import { join } from "node:path";
import type { AgentTool } from "@mariozechner/pi-agent-core";
import { Type } from "@mariozechner/pi-ai";
import { describeFetchFailure, describeOpenAiError } from "../media/openai-error.js";
import { ToolError, textResult } from "./result.js";

const parameters = Type.Object({
  text: Type.String({ description: "What to say, at most 4096 characters." }),
});

/** The speech endpoint's input limit. */
const MAX_INPUT_CHARS = 4096;

export interface TextToSpeechDeps {
  apiKey: string;
  /** e.g. "gpt-4o-mini-tts" or "tts-1". */
  model: string;
  /** Default "alloy". */
  voice?: string;
  /** How to speak (tone, pace); ignored by the tts-1 models, so not sent to them. */
  instructions?: string;
  /** Default https://api.openai.com/v1. */
  baseUrl?: string;
  /** The app's files directory; audio goes to its `workspace/` folder. */
  filesDir: string;
  fetch?: typeof fetch;
  timeoutMs?: number;
}

/**
 * Speech through OpenAI's `/audio/speech`: the mp3 is written to the workspace and its path
 * returned, so the assistant can send it with a channel's send tool like any other file.
 */
export function createTextToSpeechTool(deps: TextToSpeechDeps): AgentTool<typeof parameters> {
  const baseUrl = (deps.baseUrl ?? "https://api.openai.com/v1").replace(/\/+$/, "");
  const timeoutMs = deps.timeoutMs ?? 120_000;
  const doFetch = deps.fetch ?? fetch;
  return {
    name: "text_to_speech",
    label: "Text to speech",
    description:
      "Turn text into spoken audio (mp3). Returns the path of the audio file, which you can then send " +
      "with a send tool, e.g. as a voice message.",
    parameters,
    async execute(_id, params, signal) {
      const text = params.text.trim();
      if (!text) throw new ToolError("Text to speech needs some text.");
      if (text.length > MAX_INPUT_CHARS) {
        throw new ToolError(
          `The text is ${text.length} characters; text_to_speech takes at most ${MAX_INPUT_CHARS}. Split it.`,
        );
      }
      const audio = await speak(text, signal);
      const dir = join(deps.filesDir, "workspace");
      await mkdir(dir, { recursive: true, mode: 0o700 });
      const stamp = new Date().toISOString().replace(/\D/g, "").slice(0, 14);
      const path = join(dir, `speech-${stamp}-${randomBytes(4).toString("hex")}.mp3`);
      await writeFile(path, audio, { mode: 0o600, flag: "wx" });
      return textResult(`Audio written to ${path} (${audio.length} bytes).`, { path, bytes: audio.length });
    },
  };

  async function speak(text: string, signal: AbortSignal | undefined): Promise<Buffer> {
    const timeout = AbortSignal.timeout(timeoutMs);
    const body: Record<string, string> = {
      model: deps.model,
      input: text,
      voice: deps.voice ?? "alloy",
      response_format: "mp3",
    };
    if (deps.instructions && !/^tts-1/.test(deps.model)) body.instructions = deps.instructions;
    let response: Response;
    let data: Buffer;
    try {
      response = await doFetch(`${baseUrl}/audio/speech`, {
        method: "POST",
        headers: { authorization: `Bearer ${deps.apiKey}`, "content-type": "application/json" },
        body: JSON.stringify(body),
        signal: signal ? AbortSignal.any([signal, timeout]) : timeout,
      });
      data = Buffer.from(await response.arrayBuffer());
    } catch (error) {
      if (signal?.aborted) throw error;
      throw new ToolError(
        `Text to speech failed: ${describeFetchFailure(error, timeout.aborted, timeoutMs)}`,
      );
    }
    if (!response.ok) {
      throw new ToolError(
        `Text to speech failed: ${describeOpenAiError(response.status, data.toString("utf8"))}`,
      );
    }
    if (data.length === 0) throw new ToolError("Text to speech failed: the provider sent no audio.");
    return data;
  }
}

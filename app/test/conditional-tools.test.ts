import { existsSync, readFileSync } from "node:fs";
import { createServer, type Server } from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { closeServer, listen, silentLogger } from "@stavrobot/common";
import {
  FAKE_MP3,
  citedText,
  searchBlocks,
  searchReply,
  startFakeAnthropic,
  startFakeAnthropicSearch,
  startFakeOpenAiAudio,
  textTurn,
  toolTurn,
  type FakeAnthropicSearch,
  type FakeLlmServer,
  type FakeOpenAiAudio,
} from "@stavrobot/common/test-support";
import { startApp, type RunningApp } from "../src/app.js";
import {
  SECRET as RUNNER_SECRET,
  startPythonRunner,
  type TestPythonRunner,
} from "../../python-runner/test/helpers.js";
import { chat, configFor, createTestEnv, post, type TestEnv } from "./helpers/app.js";
import { offeredTools } from "./helpers/tools.js";

/**
 * Every conditional tool configured, each against a loopback fake of its provider, and
 * run_python against the real python-runner: all through POST /chat with the fake LLM.
 */
let fake: FakeLlmServer;
let search: FakeAnthropicSearch;
let audio: FakeOpenAiAudio;
let python: TestPythonRunner;
let site: Server;
let siteUrl: string;
let testEnv: TestEnv;
let app: RunningApp;

beforeAll(async () => {
  fake = await startFakeAnthropic();
  search = await startFakeAnthropicSearch();
  audio = await startFakeOpenAiAudio();
  python = await startPythonRunner();
  site = createServer((_req, res) => {
    res.writeHead(200, { "Content-Type": "text/html" });
    res.end("<html><body><h1>Opening hours</h1><script>x()</script><p>Mon-Fri 9-17</p></body></html>");
  });
  siteUrl = `http://127.0.0.1:${await listen(site, 0)}/hours`;
  const extra = `
[webSearch]
apiKey = "sk-ant-search"
model = "claude-haiku-4-5"
baseUrl = "${search.url}"

[webFetch]
apiKey = "sk-ant-fetch"
model = "claude-haiku-4-5"
baseUrl = "${search.url}"
allowPrivateNetworks = true

[tts]
apiKey = "sk-tts"
model = "gpt-4o-mini-tts"
baseUrl = "${audio.url}"

[stt]
apiKey = "sk-stt"
model = "gpt-4o-transcribe"
baseUrl = "${audio.url}"

# These tests are about the tools; after web_search's results are in the conversation, the trust
# gate would ask before a fetch or code (app/test/trust.test.ts tests that).
[trust]
allow = ["web_fetch", "run_python"]
`;
  testEnv = await createTestEnv(configFor(fake, "anthropic", extra));
  app = await startApp({
    env: { ...testEnv.env, PYTHON_RUNNER_URL: python.url, STAVROBOT_INTERNAL_SECRET: RUNNER_SECRET },
    logger: silentLogger,
  });
}, 120_000);

afterAll(async () => {
  await app?.close();
  await python?.close();
  await fake?.close();
  await search?.close();
  await audio?.close();
  if (site) await closeServer(site);
  await testEnv?.cleanup();
});

async function useTool(name: string, input: Record<string, unknown>): Promise<string> {
  fake.enqueue(toolTurn(name, input), textTurn("done"));
  const before = fake.requests.length;
  const reply = await chat(app, `use ${name}`);
  expect(reply.status).toBe(200);
  return fake.requests[before + 1]?.lastUserText ?? "";
}

describe("conditional tools through /chat", () => {
  it("registers each configured tool and mentions it in the prompt", async () => {
    fake.enqueue(textTurn("hi"));
    await chat(app, "hello");
    const request = fake.requests.at(-1)?.body;
    const names = offeredTools(request);
    expect(names).toEqual(
      expect.arrayContaining(["web_search", "web_fetch", "text_to_speech", "run_python"]),
    );
    expect(names).not.toContain("request_coding_task");
    const system = (request.system as { text: string }[]).map((block) => block.text).join("\n");
    // The web line is kept (without its tag); the send-tool line is left out: no channel is configured.
    expect(system).toContain("\n- Use web_search and web_fetch for anything current or on the web");
    expect(system).not.toContain("use the matching send tool");
    expect(system).not.toMatch(/^@/m);
  });

  it("web_search answers with its sources", async () => {
    const source = { url: "https://example.org/news", title: "News" };
    search.enqueue(
      searchReply([...searchBlocks("latest news", [source]), citedText("Nothing happened today.", source)]),
    );
    const result = await useTool("web_search", { query: "latest news" });
    expect(result).toContain("Nothing happened today.");
    expect(result).toContain("https://example.org/news");
    expect(search.requests.at(-1)?.body.tools[0].type).toBe("web_search_20250305");
  });

  it("web_fetch reads a page and has the model do the task", async () => {
    search.enqueue(searchReply([{ type: "text", text: "Open Monday to Friday, 9 to 17." }]));
    const result = await useTool("web_fetch", { url: siteUrl, task: "When is it open?" });
    expect(result).toContain("Open Monday to Friday, 9 to 17.");
    const asked = JSON.stringify(search.requests.at(-1)?.body);
    expect(asked).toContain("Mon-Fri 9-17");
    expect(asked).not.toContain("x()");
  });

  it("text_to_speech writes an mp3 the send tools can use", async () => {
    const result = await useTool("text_to_speech", { text: "Good morning" });
    const path = /Audio written to (\S+\.mp3)/.exec(result)?.[1];
    expect(path).toBeDefined();
    expect(readFileSync(path as string)).toEqual(FAKE_MP3);
    expect(audio.speech.at(-1)?.body).toMatchObject({ input: "Good morning", model: "gpt-4o-mini-tts" });
  });

  it("transcribes a voice note sent as audio: the transcript is the text, the audio stays attached", async () => {
    audio.setTranscript("remind me to call the plumber");
    fake.enqueue(textTurn("I will."));
    const before = fake.requests.length;
    const reply = await post(app.port, "/chat", {
      audio: Buffer.from("OggS fake voice").toString("base64"),
      audioContentType: "audio/ogg",
    });
    expect(reply.status).toBe(200);
    const told = fake.requests[before]?.lastUserText ?? "";
    expect(told).toContain("Text: remind me to call the plumber");
    expect(told).toMatch(/A file was received: voice-note\.ogg \(audio\/ogg/);
    expect(audio.transcriptions.at(-1)?.fileName).toMatch(/\.ogg$/);
  });

  it("run_python runs code in the python-runner and saves its output files", async () => {
    const result = await useTool("run_python", {
      code: "open('/tmp/run/output/sum.txt','w').write(str(2+3)); print('sum written')",
    });
    expect(result).toContain("sum written");
    const saved = /- (\S+sum\.txt) \(1 bytes\)/.exec(result)?.[1];
    expect(saved && existsSync(saved)).toBe(true);
    expect(readFileSync(saved as string, "utf8")).toBe("5");
  });
});

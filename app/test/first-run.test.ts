import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { PassThrough } from "node:stream";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  FAKE_ANTHROPIC_MODELS,
  FAKE_OPENAI_MODEL_ID,
  startFakeAnthropic,
  startFakeEmbeddings,
  startFakeOpenAI,
  textTurn,
  type FakeLlmServer,
} from "@stavrobot/common/test-support";
import { loadConfig } from "../src/boot/config.js";
import { mayAskFirstRun, runFirstRun } from "../src/boot/first-run.js";
import { terminalMissing } from "./helpers/cli.js";
import { repoRoot } from "./helpers/process.js";
import { firstStartInTerminal, plain, type Terminal } from "./helpers/terminal.js";

/**
 * The first `npm start` at a terminal: the address and the generated password, the plain word that
 * nothing answers without a provider, and the questions, driven here over streams as a person at
 * the terminal would answer them, against the fake Anthropic (which refuses keys containing
 * "invalid").
 */
let fake: FakeLlmServer;
const dirs: string[] = [];
const EXAMPLE = join(repoRoot, "config.example.toml");

beforeAll(async () => {
  fake = await startFakeAnthropic();
});
afterAll(async () => {
  await fake?.close();
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

/** Runs the first start's questions with `answers` typed one per line; returns what it printed. */
async function firstRun(answers: string[], end = true) {
  const dir = mkdtempSync(join(tmpdir(), "stavrobot-first-run-"));
  dirs.push(dir);
  const configPath = join(dir, "main", "config.toml");
  const input = new PassThrough();
  const output = new PassThrough();
  let printed = "";
  output.on("data", (chunk: Buffer) => (printed += chunk.toString()));
  input.write(answers.map((answer) => `${answer}\n`).join(""));
  if (end) input.end();
  const set = await runFirstRun({
    configPath,
    examplePath: EXAMPLE,
    address: "http://localhost:3000",
    input,
    output,
  });
  return { set, printed, configPath, text: readFileSync(configPath, "utf8") };
}

describe("the first start at a terminal", () => {
  it("asks only at a terminal, outside CI, when there is no config.toml yet", () => {
    const tty = { stdin: { isTTY: true }, stdout: { isTTY: true } };
    expect(mayAskFirstRun({}, tty, false)).toBe(true);
    expect(mayAskFirstRun({ CI: "true" }, tty, false)).toBe(false);
    expect(mayAskFirstRun({}, tty, true)).toBe(false);
    expect(mayAskFirstRun({}, { stdin: {}, stdout: { isTTY: true } }, false)).toBe(false);
    expect(mayAskFirstRun({}, { stdin: { isTTY: true }, stdout: {} }, false)).toBe(false);
  });

  it("says where it is, the password, and that it cannot answer yet; skipping leaves a config without a key", async () => {
    const run = await firstRun([""]);
    expect(run.set).toBe(false);
    const config = loadConfig(run.configPath);
    expect(run.printed).toContain("Address:  http://localhost:3000");
    expect(run.printed).toContain(`Password: ${config.password}`);
    expect(run.printed).toContain("cannot answer until a model provider is set");
    expect(run.printed).toContain("Skipped");
    expect(config.apiKey).toBeUndefined();
    // The example's comments are all there: only the password was filled in.
    expect(run.text).toBe(
      readFileSync(EXAMPLE, "utf8").replace('password = "CHANGE-ME"', `password = "${config.password}"`),
    );
  });

  it("says a refused key was refused, asks again, and writes the accepted one", async () => {
    const run = await firstRun([
      "3",
      fake.url,
      "a",
      "claude-sonnet-4-5",
      "sk-ant-invalid-typo",
      "y",
      "3",
      fake.url,
      "a",
      "claude-sonnet-4-5",
      "sk-ant-api03-right",
    ]);
    expect(run.set).toBe(true);
    expect(run.printed).toMatch(/That did not work: .*refused the key \(401\)/);
    expect(run.printed).toContain("Try again (your answers are kept)");
    expect(run.printed).toMatch(/OK: .*the key is accepted\. Written to/);
    expect(run.printed).not.toContain("sk-ant-api03-right");
    const config = loadConfig(run.configPath);
    expect(config).toMatchObject({
      provider: "local",
      model: "claude-sonnet-4-5",
      baseUrl: fake.url,
      api: "anthropic-messages",
      apiKey: "sk-ant-api03-right",
    });
    // Written beside its documentation, the rest of the file kept.
    expect(run.text).toContain('# apiKey = "sk-ant-..."\napiKey = "sk-ant-api03-right"');
    expect(run.text).toContain("[queue]");
  });

  it("offers search by meaning after the provider, checks the endpoint, and writes it", async () => {
    const embeddings = await startFakeEmbeddings({ apiKey: "sk-embed-first" });
    try {
      const refused = await firstRun(["", embeddings.url, "fake-embed-small", "sk-wrong"]);
      expect(refused.printed).toContain("Optional: search by meaning");
      expect(refused.printed).toMatch(/That did not work: .*Incorrect API key provided.*Settings page/);
      expect(loadConfig(refused.configPath).embeddings).toBeUndefined();

      const run = await firstRun(["", embeddings.url, "fake-embed-small", "sk-embed-first"]);
      expect(run.printed).toMatch(
        /OK: .*fake-embed-small\S*, \d+ dimensions answered; .*running app\. Written to/,
      );
      expect(run.printed).not.toContain("sk-embed-first");
      expect(loadConfig(run.configPath).embeddings).toMatchObject({
        baseUrl: embeddings.url,
        model: "fake-embed-small",
        apiKey: "sk-embed-first",
      });
    } finally {
      await embeddings.close();
    }
  });

  it("lets the person give up after a refusal, and ends quietly when the input ends", async () => {
    const refused = await firstRun(["3", fake.url, "a", "claude-sonnet-4-5", "sk-ant-invalid", "n"]);
    expect(refused.set).toBe(false);
    expect(refused.printed).toContain("refused the key");
    expect(loadConfig(refused.configPath).apiKey).toBeUndefined();

    const unknown = await firstRun(["7", ""]);
    expect(unknown.printed).toContain('"7" is not one of 1, 2 or 3.');
    expect(unknown.set).toBe(false);

    // Ctrl-D in the middle of the questions: nothing half-written, the start goes on.
    const ended = await firstRun(["2", "openai"]);
    expect(ended.set).toBe(false);
    expect(existsSync(ended.configPath)).toBe(true);
    expect(loadConfig(ended.configPath).provider).toBe("anthropic");
  });

  it("names a model the provider does not know, and what to set instead", async () => {
    const run = await firstRun(["2", "anthropic", "no-such-model-at-all", "sk-ant-x", "n"]);
    expect(run.printed).toMatch(/That did not work: .*has no model "no-such-model-at-all"/);
    expect(run.set).toBe(false);
  });
});

/**
 * The same questions as a person meets them: `npm start` on a pseudo-terminal, its port held by
 * another listener so the start ends by itself once they are over (nothing else is started).
 */
describe.skipIf(terminalMissing)(
  `the first start's questions in a terminal${terminalMissing ? ` (skipped: ${terminalMissing})` : ""}`,
  () => {
    let listing: FakeLlmServer;
    let unlisted: FakeLlmServer;
    let openai: FakeLlmServer;
    beforeAll(async () => {
      // A server that lists its models (and refuses any other), one without a list, an OpenAI one.
      listing = await startFakeAnthropic({ models: FAKE_ANTHROPIC_MODELS });
      unlisted = await startFakeAnthropic({ modelList: false });
      openai = await startFakeOpenAI();
    });
    afterAll(async () => {
      await Promise.all([listing?.close(), unlisted?.close(), openai?.close()]);
    });

    /** `npm start` at a terminal on a data directory without config.toml. */
    async function terminal(): Promise<{ term: Terminal; configPath: string }> {
      const dir = mkdtempSync(join(tmpdir(), "stavrobot-first-run-pty-"));
      dirs.push(dir);
      const configPath = join(dir, "main", "config.toml");
      const term = await firstStartInTerminal(
        { PATH: process.env.PATH, HOME: process.env.HOME, DATA_DIR: dir, CONFIG_PATH: configPath },
        { endAfterQuestions: true },
      );
      return { term, configPath };
    }

    /** Search by meaning skipped; the start went on after the questions and stopped at the port held for the test. */
    const endsAtThePort = async (term: Terminal) => {
      await term.answer("or Enter to skip: ", "");
      await term.waitFor("Ports in use");
      await term.exited;
    };

    it("answers a provider's misspelt name with the closest names, naming no library, and asks again", async () => {
      const { term, configPath } = await terminal();
      await term.answer("Which one?", "2");
      await term.answer("Provider (e.g. openai): ", "antropic");
      await term.waitFor('No provider "antropic" is known. Did you mean "anthropic"?');
      await term.answer("Provider (e.g. openai): ", "");
      await term.waitFor("Skipped");
      await endsAtThePort(term);
      const screen = plain(term.screen());
      expect(screen).not.toMatch(/pi-ai/i);
      expect(loadConfig(configPath).provider).toBe("anthropic");
    }, 60_000);

    it("refuses a model the server does not list with the closest, and a second try keeps every answer", async () => {
      const { term, configPath } = await terminal();
      await term.answer("Which one?", "3");
      await term.answer("Server address", listing.url);
      await term.answer("OpenAI's API or Anthropic's?", "a");
      await term.answer("Model id as the server names it", "claude-sonet-4-5");
      await term.answer("API key", "sk-ant-api03-typed-once");
      await term.waitFor(
        /That did not work: .*lists no model "claude-sonet-4-5" \(did you mean "claude-sonnet-4-5-20250929"/,
      );
      // Nothing was written meanwhile.
      expect(loadConfig(configPath).model).toBe("claude-sonnet-4-5");
      await term.answer("save it anyway, or skip? [T/s/n]", "t");
      // Each question again, its earlier answer (or the closest model) kept by Enter.
      await term.answer("Which one? [3]", "");
      await term.answer(`Server address [${listing.url}]`, "");
      await term.answer("[o/A]", "");
      await term.answer("Model id as the server names it [claude-sonnet-4-5-20250929]", "");
      await term.answer("[Enter keeps the one typed", "");
      await term.waitFor(
        /OK: local\/claude-sonnet-4-5-20250929: reachable, the key is accepted\. Written to/,
      );
      await endsAtThePort(term);
      expect(plain(term.screen())).not.toContain("sk-ant-api03-typed-once");
      expect(loadConfig(configPath)).toMatchObject({
        provider: "local",
        model: "claude-sonnet-4-5-20250929",
        baseUrl: listing.url,
        api: "anthropic-messages",
        apiKey: "sk-ant-api03-typed-once",
      });
    }, 60_000);

    it("saves a model the server does not list when asked to save it anyway", async () => {
      const { term, configPath } = await terminal();
      await term.answer("Which one?", "3");
      await term.answer("Server address", listing.url);
      await term.answer("OpenAI's API or Anthropic's?", "a");
      await term.answer("Model id as the server names it", "no-such-model-xyz");
      await term.answer("API key", "");
      await term.waitFor(/lists no model "no-such-model-xyz" \(none is close; it has "claude-/);
      await term.answer("save it anyway, or skip? [T/s/n]", "s");
      await term.waitFor("Saved as it is, unchecked");
      await endsAtThePort(term);
      expect(loadConfig(configPath)).toMatchObject({ provider: "local", model: "no-such-model-xyz" });
    }, 60_000);

    it("checks a server without a model list with one tiny request, says no key was needed, and leaves out Anthropic's /v1", async () => {
      const { term, configPath } = await terminal();
      await term.answer("Which one?", "3");
      await term.answer("Server address", `${unlisted.url}/v1`);
      await term.answer("OpenAI's API or Anthropic's?", "a");
      await term.answer("Model id as the server names it", "my-proxy-model");
      unlisted.enqueue(textTurn("H"));
      await term.answer("API key", "");
      await term.waitFor(`Note: the address is taken without /v1 (${unlisted.url})`);
      await term.waitFor(
        /OK: local\/my-proxy-model: reachable, no key needed \(the server lists no models; it answered a one-token request\)\. Written to/,
      );
      await endsAtThePort(term);
      expect(plain(term.screen())).not.toContain("the key is accepted");
      const probe = unlisted.requests.at(-1);
      expect(probe?.path).toBe("/v1/messages");
      expect(probe?.body).toMatchObject({ model: "my-proxy-model", max_tokens: 1 });
      expect(loadConfig(configPath)).toMatchObject({ baseUrl: unlisted.url, model: "my-proxy-model" });
    }, 60_000);

    it("takes an address typed without http://, and calls a 404 at every path a wrong address", async () => {
      const { term, configPath } = await terminal();
      const hostPort = openai.url.replace("http://", "");
      await term.answer("Which one?", "3");
      // Nothing serves /nothing: its list and its completions both answer 404.
      await term.answer("Server address", `${hostPort}/nothing`);
      await term.waitFor(`Note: taken as http://${hostPort}/nothing.`);
      await term.answer("OpenAI's API or Anthropic's?", "");
      await term.answer("Model id as the server names it", FAKE_OPENAI_MODEL_ID);
      await term.answer("API key", "");
      await term.waitFor(
        /That did not work: .*nothing answers at http:\/\/[0-9.:]+\/nothing .*the address is wrong/,
      );
      await term.waitFor("usually ends in /v1");
      expect(plain(term.sinceLastAnswer())).not.toContain("turns retry by themselves");
      await term.answer("save it anyway, or skip? [T/s/n]", "t");
      await term.answer("Which one? [3]", "");
      await term.answer("Server address", `${hostPort}/v1`);
      await term.answer("[O/a]", "");
      await term.answer(`Model id as the server names it [${FAKE_OPENAI_MODEL_ID}]`, "");
      await term.answer("API key", "");
      await term.waitFor(/OK: local\/fake-model: reachable, no key needed\. Written to/);
      await endsAtThePort(term);
      expect(loadConfig(configPath)).toMatchObject({
        baseUrl: `${openai.url}/v1`,
        api: "openai-completions",
      });
    }, 60_000);
  },
);

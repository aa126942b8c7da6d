import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { PassThrough } from "node:stream";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startFakeAnthropic, type FakeLlmServer } from "@stavrobot/common/test-support";
import { loadConfig } from "../src/boot/config.js";
import { mayAskFirstRun, runFirstRun } from "../src/boot/first-run.js";
import { repoRoot } from "./helpers/process.js";

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
    expect(run.printed).toContain("Try again?");
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

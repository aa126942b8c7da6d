#!/usr/bin/env node
// A stand-in for the Claude Code CLI in tests. It takes the same arguments, reads its prompt from
// stdin (or after -p), edits files in its working directory like an agent would, and prints the
// CLI's JSON result. Markers in the prompt pick a misbehaviour: @crash, @sleep, @error-json,
// @api-error, @not-json, @slow, @refresh (rewrites the lent login), @swap-claude=<dir> (replaces
// .claude with a symlink to <dir>). The result carries a REPORT line: what the fake saw (never the API key itself).
import { createHash } from "node:crypto";
import {
  appendFileSync,
  chmodSync,
  existsSync,
  mkdirSync,
  readFileSync,
  renameSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { join } from "node:path";
import process from "node:process";
import { setTimeout as sleep } from "node:timers/promises";

const started = Date.now();
const args = process.argv.slice(2);
const valueOf = (flag) => {
  const index = args.indexOf(flag);
  return index === -1 ? undefined : args[index + 1];
};
const positional = args[args.indexOf("-p") + 1];
const stdin = readFileSync(0, "utf8");
const prompt = stdin || (positional && !positional.startsWith("-") ? positional : "");
const has = (marker) => prompt.includes(marker);
const home = process.env.HOME ?? "";
const credentialsPath = join(home, ".claude", ".credentials.json");

function systemPromptReport() {
  const path = valueOf("--append-system-prompt-file");
  try {
    const text = readFileSync(path, "utf8");
    const guide = /(\S+PLUGIN\.md)/.exec(text)?.[1];
    const guideText = guide ? readFileSync(guide, "utf8") : "";
    return { path, readable: true, guide, guideReadable: guideText.includes("# Writing a Stavrobot plugin") };
  } catch (error) {
    return { path, readable: false, error: String(error) };
  }
}

function credentialsReport() {
  if (!existsSync(credentialsPath)) return null;
  const info = statSync(credentialsPath);
  const text = readFileSync(credentialsPath, "utf8");
  return {
    sha: createHash("sha256").update(text).digest("hex").slice(0, 16),
    mode: (info.mode & 0o777).toString(8),
    uid: info.uid,
  };
}

function print(result, code = 0) {
  appendFileSync("fake-runs.jsonl", JSON.stringify({ started, ended: Date.now(), pid: process.pid }) + "\n");
  process.stdout.write(JSON.stringify(result) + "\n");
  process.exit(code);
}

const base = { type: "result", duration_ms: 12, num_turns: 1, session_id: "fake-session", total_cost_usd: 0 };

if (has("@crash")) {
  process.stderr.write("fake-claude: something broke badly\n");
  process.exit(3);
}
if (has("@sleep")) await sleep(120_000);
if (has("@slow")) await sleep(700);
if (has("@not-json")) {
  process.stdout.write("I changed some files, probably.\n");
  process.exit(0);
}
if (has("@error-json")) {
  print(
    { ...base, subtype: "error_max_turns", is_error: true, errors: ["Reached maximum number of turns (3)"] },
    1,
  );
}
if (has("@api-error")) {
  print({ ...base, subtype: "success", is_error: true, result: "API Error: 401 invalid x-api-key" }, 1);
}

const report = {
  args,
  prompt,
  uid: process.getuid(),
  gid: process.getgid(),
  cwd: process.cwd(),
  home,
  envKeys: Object.keys(process.env).sort(),
  apiKey: { set: Boolean(process.env.ANTHROPIC_API_KEY), length: process.env.ANTHROPIC_API_KEY?.length ?? 0 },
  baseUrl: process.env.ANTHROPIC_BASE_URL ?? null,
  credentials: credentialsReport(),
  systemPrompt: systemPromptReport(),
};

mkdirSync("hello", { recursive: true });
writeFileSync(
  join("hello", "manifest.json"),
  JSON.stringify({ name: "hello", description: "Says hello", entrypoint: "run", parameters: {} }),
);
writeFileSync(join("hello", "run"), '#!/bin/sh\necho \'{"hello": "world"}\'\n');
chmodSync(join("hello", "run"), 0o755);
appendFileSync("notes.txt", `${prompt.split("\n")[0]}\n`);

if (has("@refresh")) {
  const refreshed = { claudeAiOauth: { accessToken: "refreshed-token", expiresAt: Date.now() + 3_600_000 } };
  writeFileSync(credentialsPath, JSON.stringify(refreshed), { mode: 0o600 });
}
const swapTarget = /@swap-claude=(\S+)/.exec(prompt)?.[1];
if (swapTarget) {
  renameSync(join(home, ".claude"), join(home, ".claude-moved"));
  symlinkSync(swapTarget, join(home, ".claude"));
}

print({
  ...base,
  subtype: "success",
  is_error: false,
  result: `Created tool hello.\nREPORT ${JSON.stringify(report)}`,
});

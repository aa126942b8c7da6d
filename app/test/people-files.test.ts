import { existsSync, mkdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { basicAuthHeader, silentLogger } from "@stavrobot/common";
import {
  FAKE_TELEGRAM_TOKEN,
  freePort,
  parseTelegramHtml,
  startFakeAnthropic,
  startFakeTelegram,
  textTurn,
  toolTurn,
  type FakeLlmServer,
  type FakeTelegram,
  type RecordedRequest,
} from "@stavrobot/common/test-support";
import { startApp, type RunningApp } from "../src/app.js";
// The real python-runner (its domain behind the service listener, on a loopback port).
import { SECRET, startPythonRunner, type TestPythonRunner } from "../../python-runner/test/helpers.js";
import { PASSWORD, chat, configFor, createTestEnv, post, quiet, type TestEnv } from "./helpers/app.js";

/*
 * A contact's agent and the owner's files: through the real Telegram webhook (the Bot API faked on
 * the wire), the real python-runner and the app's own file areas on disk.
 */

const OWNER = 1001;
const FRIEND = 2002;

const OWNER_DIARY = "OWNER DIARY: the safe code is 1234";
const OWNER_PASSPORT = "OWNER PASSPORT P-998877";
const OWNER_RESULT = "owner's earlier Python result";

let fake: FakeLlmServer;
let telegram: FakeTelegram;
let python: TestPythonRunner;
let env: TestEnv;
let app: RunningApp;
let helperId: number;
let files: string;
let own: string;

beforeAll(async () => {
  fake = await startFakeAnthropic();
  telegram = await startFakeTelegram();
  python = await startPythonRunner();
  // Telegram's webhook reaches the app at its public address.
  const port = await freePort();
  env = await createTestEnv(
    configFor(
      fake,
      "anthropic",
      `[owner]\nname = "Ada"\ntelegram = ${OWNER}\n` +
        `[telegram]\nbotToken = "${FAKE_TELEGRAM_TOKEN}"\napiBaseUrl = "${telegram.url}"\n`,
    ).replace(/^\[queue\]/m, `publicHostname = "http://127.0.0.1:${port}"\n[queue]`),
  );
  env.env.PORT = String(port);
  // The owner's files as an earlier version left them (they stay where they are).
  files = join(env.dir, "files");
  for (const area of ["uploads", "workspace", "python"]) mkdirSync(join(files, area), { recursive: true });
  writeFileSync(join(files, "workspace", "owner-diary.md"), OWNER_DIARY);
  writeFileSync(join(files, "uploads", "owner-passport.txt"), OWNER_PASSPORT);
  writeFileSync(join(files, "python", "owner-result.txt"), OWNER_RESULT);
  app = await startApp({
    env: { ...env.env, PYTHON_RUNNER_URL: python.url, STAVROBOT_INTERNAL_SECRET: SECRET },
    logger: silentLogger,
  });
  const headers = { "Content-Type": "application/json", Authorization: basicAuthHeader(PASSWORD) };
  const allowed = await fetch(`http://127.0.0.1:${app.port}/api/settings/allowlist`, {
    method: "PUT",
    headers,
    body: JSON.stringify({ signal: [], telegram: [FRIEND], whatsapp: [], email: [] }),
  });
  expect(allowed.status).toBe(200);
  const agent = await post(app.port, "/api/people/agents", {
    action: "create",
    name: "friend helper",
    system_prompt: "You keep Friend company.",
    allowed_tools: ["manage_files", "manage_uploads", "run_python", "send_telegram_message"],
  });
  helperId = Number(/Agent (\d+)/.exec(String(agent.body.message))?.[1]);
  const person = await post(app.port, "/api/people/interlocutors", {
    action: "create",
    display_name: "Friend",
    agent_id: helperId,
    service: "telegram",
    identifier: String(FRIEND),
  });
  expect(person.status).toBe(200);
  own = join(files, "agents", String(helperId));
}, 60_000);

afterAll(async () => {
  await app?.close();
  await python?.close();
  if (python) rmSync(python.root, { recursive: true, force: true });
  await telegram?.close();
  await fake?.close();
  await env?.cleanup();
});

beforeEach(() => quiet(app));

async function deliver(update: ReturnType<FakeTelegram["textUpdate"]>): Promise<void> {
  const answer = await telegram.deliverUpdate(update);
  expect(answer).toEqual({ status: 200, body: { ok: true } });
  await quiet(app);
}

/** What each tool call of a turn answered, as the model saw it (the requests after the first). */
function toolAnswers(from: number, count: number): string[] {
  return fake.requests.slice(from + 1, from + 1 + count).map((request) => request.lastUserText);
}

const systemOf = (request: RecordedRequest | undefined): string => JSON.stringify(request?.body.system);

function shown(chatId: number, from = 0): string[] {
  return telegram.sent
    .slice(from)
    .filter((sent) => String(sent.params.chat_id) === String(chatId))
    .map((sent) => parseTelegramHtml(String(sent.params.text ?? sent.params.caption ?? "")));
}

describe("a contact's agent and the owner's files", () => {
  it("cannot list, read, overwrite or hand on the owner's uploads and workspace, and is told why", async () => {
    const diary = join(files, "workspace", "owner-diary.md");
    const passport = join(files, "uploads", "owner-passport.txt");
    const calls = fake.requests.length;
    const from = telegram.sent.length;
    fake.enqueue(
      toolTurn("manage_files", { action: "list" }),
      toolTurn("manage_files", { action: "read", filename: diary }),
      toolTurn("manage_files", { action: "list", filename: join(files, "uploads") }),
      toolTurn("manage_files", { action: "write", filename: diary, content: "overwritten" }),
      toolTurn("manage_files", { action: "read", filename: "../../workspace/owner-diary.md" }),
      toolTurn("manage_files", { action: "copy", source: passport, destination: "mine.txt" }),
      toolTurn("manage_uploads", { action: "read", path: passport }),
      toolTurn("manage_uploads", { action: "read", path: "owner-passport.txt" }),
      toolTurn("run_python", { code: "print(open('input/owner-passport.txt').read())", files: [passport] }),
      toolTurn("run_python", { code: "print(1)", files: ["uploads/owner-passport.txt"] }),
      toolTurn("send_telegram_message", { recipient: "Friend", attachmentPath: passport }),
      textTurn("I cannot share those."),
    );
    await deliver(telegram.textUpdate(FRIEND, "show me Ada's diary and passport"));
    expect(systemOf(fake.requests[calls])).toContain("You keep Friend company.");
    const answers = toolAnswers(calls, 11);
    const refusal = `is not in your file areas (${own}): you can use only your own files`;
    expect(answers[0]).toContain("No files.");
    expect(answers[1]).toContain(refusal);
    expect(answers[2]).toContain(refusal);
    expect(answers[3]).toContain(refusal);
    expect(answers[4]).toContain('".." is not allowed in paths.');
    expect(answers[5]).toContain(refusal);
    expect(answers[6]).toContain(refusal);
    // A relative path is in its own uploads, where the owner's file is not.
    expect(answers[7]).toContain("Upload not found: owner-passport.txt");
    expect(answers[8]).toContain(`is not inside ${own}; only files there can be given.`);
    expect(answers[9]).toContain("File not found: uploads/owner-passport.txt");
    expect(answers[10]).toContain(refusal);
    for (const answer of answers) {
      expect(answer).not.toContain(OWNER_DIARY);
      expect(answer).not.toContain(OWNER_PASSPORT);
    }
    expect(readFileSync(diary, "utf8")).toBe(OWNER_DIARY);
    expect(existsSync(join(own, "workspace", "mine.txt"))).toBe(false);
    expect(shown(FRIEND, from)).toEqual(["I cannot share those."]);
  });

  it("keeps what the contact sends and what its tools make in its own areas, never the owner's", async () => {
    const photo = Buffer.from("friend's holiday photo");
    telegram.addFile("friend-photo", photo, "photos/file_9.jpg");
    fake.enqueue(textTurn("Lovely."));
    await deliver(telegram.photoUpdate(FRIEND, ["friend-photo"], "look"));
    const kept = await app.db.query<{ path: string }>(
      "SELECT payload->'attachments'->0->>'storedPath' AS path FROM inbox WHERE payload->>'message' LIKE 'look%'",
    );
    const stored = kept.rows[0]?.path ?? "";
    expect(stored.startsWith(join(own, "uploads") + "/")).toBe(true);
    expect(readFileSync(stored)).toEqual(photo);

    // A link planted in its own workspace (by anything but its tools) leads nowhere either.
    mkdirSync(join(own, "workspace"), { recursive: true });
    symlinkSync(join(files, "workspace", "owner-diary.md"), join(own, "workspace", "link.md"));
    const calls = fake.requests.length;
    fake.enqueue(
      toolTurn("manage_uploads", { action: "read", path: stored }),
      toolTurn("manage_files", { action: "write", filename: "note.txt", content: "3 4 5" }),
      toolTurn("run_python", {
        code: [
          "total = sum(int(x) for x in open('input/note.txt').read().split())",
          "open('output/sum.txt', 'w').write(str(total))",
          "print('sum', total)",
        ].join("\n"),
        files: ["workspace/note.txt"],
      }),
      toolTurn("manage_files", { action: "read", filename: "link.md" }),
      toolTurn("run_python", { code: "print(1)", files: ["workspace/link.md"] }),
      textTurn("Done."),
    );
    await deliver(telegram.textUpdate(FRIEND, "add these up"));
    const answers = toolAnswers(calls, 5);
    expect(JSON.stringify(fake.requests[calls + 1]?.body.messages)).toContain(photo.toString("base64"));
    expect(answers[1]).toContain(join(own, "workspace", "note.txt"));
    expect(answers[2]).toContain(`sum 12\n\nOutput files:\n- ${join(own, "python", "sum.txt")} (2 bytes)`);
    expect(answers[3]).toContain("goes through a symbolic link, which is not allowed.");
    expect(answers[4]).toContain(`is not inside ${own}; only files there can be given.`);
    expect(answers.join("\n")).not.toContain(OWNER_DIARY);
    expect(readFileSync(join(own, "python", "sum.txt"), "utf8")).toBe("12");
    // Its Python run emptied its own output directory, not the owner's.
    expect(readFileSync(join(files, "python", "owner-result.txt"), "utf8")).toBe(OWNER_RESULT);
    expect(existsSync(join(files, "workspace", "note.txt"))).toBe(false);
  });

  it("lets the owner's agent read the contact's files by their paths", async () => {
    const kept = await app.db.query<{ path: string }>(
      "SELECT payload->'attachments'->0->>'storedPath' AS path FROM inbox WHERE payload->>'message' LIKE 'look%'",
    );
    const stored = kept.rows[0]?.path ?? "";
    const calls = fake.requests.length;
    fake.enqueue(
      toolTurn("manage_files", { action: "list", filename: own }),
      toolTurn("manage_files", { action: "read", filename: join(own, "workspace", "note.txt") }),
      toolTurn("manage_uploads", { action: "read", path: stored }),
      toolTurn("manage_files", { action: "help" }),
      textTurn("Friend sent a photo and a note."),
    );
    expect((await chat(app, "what did Friend send?")).body.response).toBe("Friend sent a photo and a note.");
    const answers = toolAnswers(calls, 4);
    expect(answers[0]).toContain(`${own}:`);
    expect(answers[0]).toContain("workspace/note.txt (5 bytes)");
    expect(answers[0]).toContain("python/sum.txt (2 bytes)");
    expect(answers[1]).toContain("3 4 5");
    expect(JSON.stringify(fake.requests[calls + 3]?.body.messages)).toContain(
      Buffer.from("friend's holiday photo").toString("base64"),
    );
    expect(answers[3]).toContain(`Each subagent's files`);
    expect(answers[3]).toContain(join(files, "agents", "<agent id>"));
  });
});

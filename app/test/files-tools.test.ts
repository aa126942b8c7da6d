import { execFile } from "node:child_process";
import { promisify } from "node:util";
import {
  existsSync,
  mkdirSync,
  readFileSync,
  readdirSync,
  symlinkSync,
  utimesSync,
  writeFileSync,
} from "node:fs";
import { join } from "node:path";
import { describe, expect, it, vi } from "vitest";
import { basicAuthHeader, silentLogger } from "@stavrobot/common";
import { textTurn, toolTurn, type RecordedRequest } from "@stavrobot/common/test-support";
import { FileAreas } from "../src/files/areas.js";
import { removeOldFiles } from "../src/files/housekeeping.js";
import { InboxStore } from "../src/db/inbox.js";
import { PASSWORD, chat, useTestApp } from "./helpers/app.js";
import { callToolThroughChat } from "./helpers/tools.js";

const run = promisify(execFile);
const t = useTestApp();
const base = () => `http://127.0.0.1:${t.app.port}`;
const auth = { Authorization: basicAuthHeader(PASSWORD) };
const callTool = (name: string, input: Record<string, unknown>) => callToolThroughChat(t, name, input);

/** The tool_result blocks the model was sent in a request. */
function toolResults(request: RecordedRequest | undefined): { content: unknown }[] {
  const last = (request?.body.messages as { content: unknown }[] | undefined)?.at(-1);
  const blocks = Array.isArray(last?.content) ? (last.content as { type: string; content: unknown }[]) : [];
  return blocks.filter((block) => block.type === "tool_result");
}

/** A 1×1 PNG. */
const PNG_BASE64 =
  "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==";

describe("uploads and files", () => {
  it("takes a real multipart upload (curl -F), stores it and tells the assistant", async () => {
    const file = join(t.env.dir, "notes.txt");
    writeFileSync(file, "buy milk");
    t.fake.enqueue(textTurn("Got your notes."));
    const before = t.fake.requests.length;
    // curl runs as its own process (the server lives in this one, so it must not be blocked).
    const { stdout } = await run("curl", [
      "-s",
      "-u",
      `:${PASSWORD}`,
      "-F",
      `file=@${file}`,
      "-F",
      "filename=my notes.txt",
      `${base()}/api/upload`,
    ]);
    const answer = JSON.parse(stdout) as { message: string; filename: string };
    expect(answer.message).toBe("File uploaded successfully");
    expect(answer.filename).toMatch(/^upload-[0-9a-f-]{36}\.txt$/);
    await vi.waitFor(() => expect(t.fake.requests.length).toBe(before + 1), { timeout: 10_000 });
    const told = t.fake.requests[before]?.lastUserText ?? "";
    expect(told).toContain("Source: upload");
    expect(told).toContain("A file was received: my notes.txt (text/plain, 8 bytes)");
    expect(existsSync(join(t.env.dir, "files", "uploads", answer.filename))).toBe(true);
    await t.app.queue.idle();
  });

  it("refuses an upload over 10 MB with 413 and leaves nothing on disk; refuses a non-multipart body", async () => {
    const uploads = join(t.env.dir, "files", "uploads");
    const before = readdirSync(uploads).length;
    const big = new FormData();
    big.append("file", new Blob([Buffer.alloc(10 * 1024 * 1024 + 1)]), "big.bin");
    const refused = await fetch(`${base()}/api/upload`, { method: "POST", headers: auth, body: big });
    expect(refused.status).toBe(413);
    expect(await refused.json()).toEqual({ error: "File too large (max 10 MB)" });
    expect(readdirSync(uploads).length).toBe(before);
    const plain = await fetch(`${base()}/api/upload`, {
      method: "POST",
      headers: { ...auth, "Content-Type": "text/plain" },
      body: "x",
    });
    expect(plain.status).toBe(415);
    const empty = new FormData();
    empty.append("filename", "x");
    const noFile = await fetch(`${base()}/api/upload`, { method: "POST", headers: auth, body: empty });
    expect(noFile.status).toBe(400);
  });

  it("confines manage_files and manage_uploads: no '..', no path outside, no symlink", async () => {
    expect(
      await callTool("manage_files", { action: "write", filename: "todo.md", content: "a\nb\nc\n" }),
    ).toContain(join("files", "workspace", "todo.md"));
    expect(
      await callTool("manage_files", { action: "read_lines", filename: "todo.md", from: 2, to: 3 }),
    ).toContain("b\nc\n(lines 2-3 of 3 total)");
    expect(
      await callTool("manage_files", {
        action: "write_lines",
        filename: "todo.md",
        from: 2,
        to: 2,
        content: "B",
      }),
    ).toContain("Done. New total line count: 3.");
    expect(await callTool("manage_files", { action: "read", filename: "../main/config.toml" })).toContain(
      '".." is not allowed',
    );
    expect(await callTool("manage_files", { action: "read", filename: "/etc/passwd" })).toContain(
      "outside the file areas",
    );
    symlinkSync("/etc/passwd", join(t.env.dir, "files", "workspace", "link"));
    expect(await callTool("manage_files", { action: "read", filename: "link" })).toContain("symbolic link");
    expect(
      await callTool("manage_uploads", {
        action: "read",
        path: join(t.env.dir, "files", "workspace", "todo.md"),
      }),
    ).toContain("is not an upload");
  });

  it("manage_uploads reads an image as an image, a text file as text, and only notes a binary", async () => {
    const uploads = join(t.env.dir, "files", "uploads");
    writeFileSync(join(uploads, "upload-photo.png"), Buffer.from(PNG_BASE64, "base64"));
    writeFileSync(join(uploads, "upload-list.md"), "# Shopping\n- milk\n- bread\n");
    writeFileSync(join(uploads, "upload-backup.zip"), Buffer.from([0x50, 0x4b, 0x03, 0x04, 0x00, 0xff]));

    t.fake.enqueue(
      toolTurn("manage_uploads", { action: "read", path: join(uploads, "upload-photo.png") }),
      textTurn("A tiny picture."),
    );
    const before = t.fake.requests.length;
    expect((await chat(t.app, "what is in the photo?")).status).toBe(200);
    const [shown] = toolResults(t.fake.requests[before + 1]);
    expect(shown?.content).toEqual([
      { type: "text", text: "(see attached image)" },
      { type: "image", source: { type: "base64", media_type: "image/png", data: PNG_BASE64 } },
    ]);
    // The picture is not kept in the stored history (it would be resent every turn).
    const stored = await t.app.db.query<{ content: unknown }>(
      "SELECT content FROM messages WHERE role = 'toolResult' ORDER BY id DESC LIMIT 1",
    );
    expect(JSON.stringify(stored.rows[0]?.content)).toContain("[image (image/png) not kept in history]");
    expect(JSON.stringify(stored.rows[0]?.content)).not.toContain(PNG_BASE64);

    expect(await callTool("manage_uploads", { action: "read", path: join(uploads, "upload-list.md") })).toBe(
      "# Shopping\n- milk\n- bread\n",
    );
    expect(
      await callTool("manage_uploads", { action: "read", path: join(uploads, "upload-backup.zip") }),
    ).toBe(
      "Cannot read binary file directly (.zip). Pass its path to a plugin tool or run_python to process it.",
    );
    for (const path of ["../main/config.toml", `${uploads}/../../main/config.toml`]) {
      const refused = await callTool("manage_uploads", { action: "read", path });
      expect(refused).toContain('".." is not allowed');
      expect(refused).not.toContain("password");
    }
  });

  it("manage_files searches, edits by line, lists, copies, moves, deletes, and round-trips base64", async () => {
    const workspace = join(t.env.dir, "files", "workspace");
    const plan = join(workspace, "plan.txt");
    expect(
      await callTool("manage_files", {
        action: "write",
        filename: "plan.txt",
        content: "alpha\nbeta\ngamma\nbeta two\n",
      }),
    ).toBe(plan);
    expect(await callTool("manage_files", { action: "search", filename: "plan.txt", pattern: "beta" })).toBe(
      "2: beta\n4: beta two",
    );
    expect(
      await callTool("manage_files", { action: "search", filename: "plan.txt", pattern: "^g", regex: true }),
    ).toBe("3: gamma");
    expect(await callTool("manage_files", { action: "search", filename: "plan.txt", pattern: "zeta" })).toBe(
      "No matches.",
    );
    // from > to inserts before `from`; empty content deletes the lines.
    expect(
      await callTool("manage_files", {
        action: "write_lines",
        filename: "plan.txt",
        from: 2,
        to: 1,
        content: "inserted",
      }),
    ).toBe("Done. New total line count: 5.");
    expect(
      await callTool("manage_files", {
        action: "write_lines",
        filename: "plan.txt",
        from: 4,
        to: 4,
        content: "",
      }),
    ).toBe("Done. New total line count: 4.");
    expect(
      await callTool("manage_files", { action: "read_lines", filename: "plan.txt", from: 1, to: 4 }),
    ).toBe("alpha\ninserted\nbeta\nbeta two\n(lines 1-4 of 4 total)");
    expect(readFileSync(plan, "utf8")).toBe("alpha\ninserted\nbeta\nbeta two\n");

    const copy = join(workspace, "drafts", "plan-copy.txt");
    expect(
      await callTool("manage_files", {
        action: "copy",
        source: "plan.txt",
        destination: "drafts/plan-copy.txt",
      }),
    ).toBe(copy);
    expect(readFileSync(copy, "utf8")).toBe(readFileSync(plan, "utf8"));
    const moved = join(workspace, "final.txt");
    expect(
      await callTool("manage_files", {
        action: "move",
        source: "drafts/plan-copy.txt",
        destination: "final.txt",
      }),
    ).toBe(moved);
    expect(existsSync(copy)).toBe(false);
    expect(readFileSync(moved, "utf8")).toBe(readFileSync(plan, "utf8"));
    expect(await callTool("manage_files", { action: "read", filename: "drafts/plan-copy.txt" })).toContain(
      "File not found",
    );

    const bytes = Buffer.from([0x00, 0x01, 0x02, 0xfe, 0xff, 0x89, 0x50]);
    expect(
      await callTool("manage_files", {
        action: "write",
        filename: "blob.bin",
        content: bytes.toString("base64"),
        encoding: "base64",
      }),
    ).toBe(join(workspace, "blob.bin"));
    expect(readFileSync(join(workspace, "blob.bin"))).toEqual(bytes);
    expect(await callTool("manage_files", { action: "read", filename: "blob.bin", encoding: "base64" })).toBe(
      bytes.toString("base64"),
    );
    expect(
      await callTool("manage_files", {
        action: "write",
        filename: "bad.bin",
        content: "not base64!",
        encoding: "base64",
      }),
    ).toContain("'content' is not valid base64.");

    const listed = await callTool("manage_files", { action: "list" });
    expect(listed.split("\n")[0]).toBe(`${workspace}:`);
    const size = Buffer.byteLength(readFileSync(plan));
    expect(listed).toContain(`plan.txt (${size} bytes)`);
    expect(listed).toContain(`final.txt (${size} bytes)`);
    expect(listed).toContain(`blob.bin (${bytes.length} bytes)`);
    expect(listed).not.toContain("plan-copy.txt");
    expect(await callTool("manage_files", { action: "delete", filename: "final.txt" })).toBe(
      "Deleted final.txt.",
    );
    expect(existsSync(moved)).toBe(false);
    expect(await callTool("manage_files", { action: "list" })).not.toContain("final.txt");
  });

  it("removes only old files that no waiting message refers to", async () => {
    // An area of its own: the app's start-up clean-up may still be sweeping its own files.
    const areas = new FileAreas(join(t.env.dir, "files-for-cleanup"));
    await areas.ensure();
    const old = Date.now() / 1000 - 4 * 24 * 3600;
    const oldFile = join(areas.workspace, "old.txt");
    const freshFile = join(areas.workspace, "fresh.txt");
    const referenced = join(areas.uploads, "upload-referenced.txt");
    mkdirSync(areas.pluginOutput("p"), { recursive: true });
    const oldOutput = join(areas.pluginOutput("p"), "out.txt");
    for (const file of [oldFile, freshFile, referenced, oldOutput]) writeFileSync(file, "x");
    for (const file of [oldFile, referenced, oldOutput]) utimesSync(file, old, old);
    const inbox = new InboxStore(t.app.db);
    await t.app.db.query("INSERT INTO inbox (source, payload, status) VALUES ('upload', $1, 'pending')", [
      JSON.stringify({
        attachments: [{ storedPath: referenced, originalFilename: "r", mimeType: "text/plain", size: 1 }],
      }),
    ]);
    expect(await removeOldFiles(areas, inbox, silentLogger)).toBe(2);
    expect(existsSync(oldFile)).toBe(false);
    expect(existsSync(oldOutput)).toBe(false);
    expect(existsSync(freshFile)).toBe(true);
    expect(existsSync(referenced)).toBe(true);
    await t.app.db.query("DELETE FROM inbox WHERE status = 'pending' AND source = 'upload'");
  });
});

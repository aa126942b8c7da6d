import { readdirSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { basicAuthHeader } from "@stavrobot/common";
import { textTurn } from "@stavrobot/common/test-support";
import { INTERNAL_SECRET, PASSWORD, post, useTestApp } from "./helpers/app.js";

const t = useTestApp();

async function count(table: string): Promise<number> {
  const result = await t.app.db.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${table}`);
  return result.rows[0]!.n;
}

describe("external port authentication", () => {
  it("serves /health without credentials and reveals nothing else", async () => {
    const response = await fetch(`http://127.0.0.1:${t.app.port}/health`);
    expect(response.status).toBe(200);
    expect(await response.json()).toEqual({ status: "ok" });
  });

  it.each([
    ["no credentials", null],
    ["a wrong password", basicAuthHeader("wrong-password")],
    ["the internal secret as a Bearer token", `Bearer ${INTERNAL_SECRET}`],
    ["a malformed header", "Basic %%%"],
  ])("refuses POST /chat with %s (401 + WWW-Authenticate)", async (_label, auth) => {
    const response = await post(t.app.port, "/chat", { message: "hi" }, auth);
    expect(response.status).toBe(401);
    expect(response.body).toEqual({ error: "Unauthorized" });
    expect(response.headers.get("www-authenticate")).toMatch(/^Basic realm="stavrobot"/);
  });

  it("answers 401 (not 404) for unknown routes without credentials, so nothing is revealed", async () => {
    const response = await fetch(`http://127.0.0.1:${t.app.port}/secret-admin`);
    expect(response.status).toBe(401);
  });

  it("accepts any username with the right password", async () => {
    t.fake.enqueue(textTurn("hello"));
    const response = await post(t.app.port, "/chat", { message: "hi" }, basicAuthHeader(PASSWORD, "whoever"));
    expect(response.status).toBe(200);
    expect(response.body).toEqual({ response: "hello" });
  });
});

describe("internal port authentication", () => {
  it("refuses the owner's password", async () => {
    const response = await post(t.app.internalPort, "/chat", { message: "hi" }, basicAuthHeader(PASSWORD));
    expect(response.status).toBe(401);
  });

  it("refuses unauthenticated calls and wrong secrets", async () => {
    expect((await post(t.app.internalPort, "/chat", { message: "hi" }, null)).status).toBe(401);
    expect((await post(t.app.internalPort, "/chat", { message: "hi" }, "Bearer not-the-secret")).status).toBe(
      401,
    );
  });

  it("accepts the internal secret and serves only POST /chat", async () => {
    t.fake.enqueue(textTurn("from a sibling"));
    const ok = await post(
      t.app.internalPort,
      "/chat",
      { message: "result", source: "plugin:x/y" },
      `Bearer ${INTERNAL_SECRET}`,
    );
    expect(ok.body).toEqual({ response: "from a sibling" });
    const health = await fetch(`http://127.0.0.1:${t.app.internalPort}/health`, {
      headers: { Authorization: `Bearer ${INTERNAL_SECRET}` },
    });
    expect(health.status).toBe(404);
  });
});

describe("bad input to POST /chat", () => {
  it.each([
    ["malformed JSON", "{not json", 400, /^Invalid JSON/],
    ["a JSON array", "[1,2]", 400, /must be a JSON object/],
    ["an empty body", "", 400, /empty/],
    ["a number for message", JSON.stringify({ message: 42 }), 400, /message/],
    ["a string for attachments", JSON.stringify({ message: "x", attachments: "nope" }), 400, /attachments/],
    ["an unknown field", JSON.stringify({ message: "x", extra: true }), 400, /extra/],
    ["no content at all", JSON.stringify({ source: "cli" }), 400, /At least one of/],
    ["a blank message", JSON.stringify({ message: "   " }), 400, /At least one of/],
    [
      "invalid base64 in files",
      JSON.stringify({ files: [{ data: "!!!", filename: "a.txt", mimeType: "text/plain" }] }),
      400,
      /base64/,
    ],
    [
      "an attachment outside the uploads dir",
      JSON.stringify({
        attachments: [{ storedPath: "/etc/passwd", originalFilename: "p", mimeType: "text/plain", size: 1 }],
      }),
      400,
      /Attachment p is not in the uploads directory/,
    ],
    [
      "an attachment path that does not exist",
      JSON.stringify({
        attachments: [
          { storedPath: "/nonexistent/x.png", originalFilename: "x.png", mimeType: "image/png", size: 1 },
        ],
      }),
      400,
      /Attachment not found: x.png/,
    ],
  ])("%s → clear %s and nothing saved", async (_label, raw, status, message) => {
    const before = { inbox: await count("inbox"), messages: await count("messages") };
    const requestsBefore = t.fake.requests.length;
    const response = await post(t.app.port, "/chat", undefined, basicAuthHeader(PASSWORD), raw);
    expect(response.status).toBe(status);
    expect(String(response.body.error)).toMatch(message);
    expect(await count("inbox")).toBe(before.inbox);
    expect(await count("messages")).toBe(before.messages);
    expect(t.fake.requests.length).toBe(requestsBefore);
  });

  it("refuses a body over 25 MB with 413 and saves nothing", async () => {
    const before = await count("inbox");
    const big = JSON.stringify({ message: "x".repeat(26 * 1024 * 1024) });
    const response = await post(t.app.port, "/chat", undefined, basicAuthHeader(PASSWORD), big).catch(
      (error: Error) => ({ status: -1, body: { error: error.message }, headers: new Headers() }),
    );
    expect(response.status).toBe(413);
    expect(response.body).toEqual({ error: "Request body too large" });
    expect(await count("inbox")).toBe(before);
  });

  it("refuses a decoded file over 10 MB with 413 and leaves no file behind", async () => {
    const before = await count("inbox");
    const uploads = join(t.env.dir, "files", "uploads");
    const filesBefore = readdirSync(uploads);
    const data = Buffer.alloc(11 * 1024 * 1024, 1).toString("base64");
    const response = await post(t.app.port, "/chat", {
      files: [
        { data: Buffer.from("small").toString("base64"), filename: "ok.txt", mimeType: "text/plain" },
        { data, filename: "big.bin", mimeType: "application/octet-stream" },
      ],
    });
    expect(response.status).toBe(413);
    expect(response.body.error).toBe("File big.bin is larger than 10 MB");
    expect(await count("inbox")).toBe(before);
    expect(readdirSync(uploads)).toEqual(filesBefore);
  });
});

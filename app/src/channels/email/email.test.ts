import { describe, expect, it } from "vitest";
import { addressMatches, normalizeAddress } from "./address.js";
import { aligned, parseAuthenticationResults, proveSender } from "./auth.js";
import { parseMail, trimReply } from "./parse.js";

describe("email addresses", () => {
  it("matches exact addresses case-insensitively", () => {
    expect(addressMatches("Ada@Example.com", "ada@example.COM")).toBe(true);
    expect(addressMatches("ada@example.com", "bob@example.com")).toBe(false);
  });

  it("lets a bare star allow everyone, and a star elsewhere never crosses the @", () => {
    expect(addressMatches("*", "anyone@anywhere.org")).toBe(true);
    expect(addressMatches("*@example.com", "ada@example.com")).toBe(true);
    expect(addressMatches("*@example.com", "ada@evil.com@example.com")).toBe(false);
    expect(addressMatches("*@example.com", "ada@sub.example.com")).toBe(false);
    expect(addressMatches("ada+*@gmail.com", "ada+news@gmail.com")).toBe(true);
    expect(addressMatches("ada+*@gmail.com", "ada@gmail.com")).toBe(false);
    expect(addressMatches("ada@*", "ada@x.org")).toBe(true);
    expect(addressMatches("a*", "ab@x.org")).toBe(false);
  });

  it("refuses what is not an address", () => {
    expect(normalizeAddress("not an address")).toBeUndefined();
    expect(addressMatches("*", "nobody")).toBe(false);
  });
});

describe("Authentication-Results", () => {
  const real =
    "mx.example.net; dkim=pass header.d=example.org header.s=s1; spf=pass (sender ok) smtp.mailfrom=bounce@mail.example.org; dmarc=pass (p=reject) header.from=example.org";

  it("parses methods, results and properties, comments dropped", () => {
    const parsed = parseAuthenticationResults(real);
    expect(parsed?.authservId).toBe("mx.example.net");
    expect(parsed?.results.map((r) => `${r.method}=${r.result}`)).toEqual([
      "dkim=pass",
      "spf=pass",
      "dmarc=pass",
    ]);
    expect(parsed?.results[1]?.properties["smtp.mailfrom"]).toBe("bounce@mail.example.org");
  });

  it("proves a sender by DMARC, aligned DKIM or aligned SPF from the configured server", () => {
    expect(proveSender([real], "mx.example.net", "ada@example.org")).toEqual({ proven: true, by: "dmarc" });
    expect(
      proveSender(
        ["mx.example.net; spf=pass smtp.mailfrom=example.org"],
        "mx.example.net",
        "ada@example.org",
      ),
    ).toEqual({
      proven: true,
      by: "spf",
    });
    expect(
      proveSender(
        ["mx.example.net; dkim=pass header.i=@mail.example.org"],
        "MX.example.net",
        "ada@example.org",
      ),
    ).toEqual({
      proven: true,
      by: "dkim",
    });
  });

  it("does not prove a sender whose passing checks are for another domain", () => {
    const proof = proveSender(
      [
        "mx.example.net; spf=pass smtp.mailfrom=evil.com; dkim=pass header.d=evil.com; dmarc=fail header.from=example.org",
      ],
      "mx.example.net",
      "ada@example.org",
    );
    expect(proof.proven).toBe(false);
    expect(proof.proven ? "" : proof.reason).toContain("no passing check aligned with example.org");
  });

  it("trusts only the topmost header of the configured server, never a forged one below it or another server's", () => {
    const forged = "mx.example.net; dmarc=pass header.from=example.org";
    const realFail = "mx.example.net; dmarc=fail header.from=example.org; spf=fail smtp.mailfrom=example.org";
    expect(proveSender([realFail, forged], "mx.example.net", "ada@example.org").proven).toBe(false);
    expect(
      proveSender(["other.example; dmarc=pass header.from=example.org"], "mx.example.net", "ada@example.org")
        .proven,
    ).toBe(false);
    expect(proveSender([real], undefined, "ada@example.org").proven).toBe(false);
  });

  it("aligns a domain with its subdomains only", () => {
    expect(aligned("mail.example.org", "example.org")).toBe(true);
    expect(aligned("example.org", "notexample.org")).toBe(false);
  });
});

describe("parsing a mail", () => {
  it("reads an HTML-only mail as text, with its headers, threading and authentication results in order", async () => {
    const raw = [
      "Authentication-Results: mx.example.net; dmarc=pass header.from=example.org",
      "Authentication-Results: mx.example.net; dmarc=pass header.from=forged.example",
      "From: Ada Lovelace <Ada@Example.org>",
      "To: bot@example.net",
      "Reply-To: other@example.com",
      "Subject: Dinner",
      "Message-ID: <m2@example.org>",
      "In-Reply-To: <m1@example.net>",
      "References: <m0@example.org> <m1@example.net>",
      "MIME-Version: 1.0",
      "Content-Type: text/html; charset=utf-8",
      "",
      "<html><body><p>Shall we meet at <b>eight</b>?</p><script>alert(1)</script></body></html>",
    ].join("\r\n");
    const mail = await parseMail(raw);
    expect(mail.from).toBe("ada@example.org");
    expect(mail.fromName).toBe("Ada Lovelace");
    expect(mail.replyTo).toEqual(["other@example.com"]);
    expect(mail.subject).toBe("Dinner");
    expect(mail.messageId).toBe("<m2@example.org>");
    expect(mail.inReplyTo).toBe("<m1@example.net>");
    expect(mail.references).toEqual(["<m0@example.org>", "<m1@example.net>"]);
    expect(mail.text).toBe("Shall we meet at eight?");
    expect(mail.authenticationResults[1]).toContain("forged.example");
  });

  it("keeps attachments, and caps a very long text", async () => {
    const raw = [
      "From: ada@example.org",
      "Subject: files",
      "MIME-Version: 1.0",
      'Content-Type: multipart/mixed; boundary="b"',
      "",
      "--b",
      "Content-Type: text/plain",
      "",
      "x".repeat(25_000),
      "--b",
      "Content-Type: text/plain; name=notes.txt",
      "Content-Disposition: attachment; filename=notes.txt",
      "Content-Transfer-Encoding: base64",
      "",
      Buffer.from("hello").toString("base64"),
      "--b--",
      "",
    ].join("\r\n");
    const mail = await parseMail(raw);
    expect(mail.attachments).toEqual([
      { filename: "notes.txt", contentType: "text/plain", content: Buffer.from("hello") },
    ]);
    expect(mail.text.length).toBeLessThan(21_000);
    expect(mail.text).toContain("was cut");
  });

  it("trims the quoted mail and the signature from a reply", () => {
    expect(
      trimReply("Yes, eight is fine.\n\nOn Mon, 1 Jun 2026, Bot <bot@x.net> wrote:\n> Shall we?\n> ok"),
    ).toBe("Yes, eight is fine.");
    expect(trimReply("Sure.\n-- \nAda\nAnalyst")).toBe("Sure.");
    expect(trimReply("Fine.\n\nFrom: Bot\nSent: Monday\nTo: Ada\nSubject: x\n\nold")).toBe("Fine.");
    expect(trimReply("Top line\n> quoted\n> more\n")).toBe("Top line");
    expect(trimReply("> only a quote")).toBe("> only a quote");
    expect(trimReply("From: here to there is far.")).toBe("From: here to there is far.");
  });
});

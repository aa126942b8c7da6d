import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { basicAuthHeader } from "@stavrobot/common";
import { freePort, startFakeAnthropic, textTurn, type FakeLlmServer } from "@stavrobot/common/test-support";
import type { Checked } from "../src/doctor/checks.js";
import { PASSWORD, configFor, createTestEnv, type TestEnv } from "./helpers/app.js";
import { MAIL_PASSWORD, MAIL_USER, hasDovecot, mail, startDovecot, type Dovecot } from "./helpers/dovecot.js";
import { startProduct, type Product } from "./helpers/product.js";
import { makeCertificate, removeCertificate, startSmtpCapture, type SmtpCapture } from "./helpers/smtp.js";

/**
 * Email in the product as people run it (`npm start`, the bundles with the mail libraries inside):
 * a mail read by IMAP is answered over SMTP with STARTTLS and a login (the server's certificate
 * made now and trusted through NODE_EXTRA_CA_CERTS), and the doctor says how mail comes and goes.
 */
describe.skipIf(!hasDovecot)("email in the running product", () => {
  let fake: FakeLlmServer;
  let dovecot: Dovecot;
  let smtp: SmtpCapture;
  let testEnv: TestEnv;
  let running: Product | undefined;
  let certificate: ReturnType<typeof makeCertificate>;

  beforeAll(async () => {
    certificate = makeCertificate();
    dovecot = await startDovecot();
    smtp = await startSmtpCapture({
      port: await freePort(),
      user: "sender",
      password: "smtp-secret",
      tls: { key: certificate.key, cert: certificate.cert },
    });
    fake = await startFakeAnthropic();
    testEnv = await createTestEnv(
      configFor(
        fake,
        "anthropic",
        `[owner]\nname = "Ada"\nemail = "*@example.org"\n` +
          `[email]\nimapHost = "127.0.0.1"\nimapPort = ${dovecot.port}\nimapTls = false\n` +
          `imapUser = "${MAIL_USER}"\nimapPassword = "${MAIL_PASSWORD}"\nauthservId = "mx.test.example"\n` +
          `smtpHost = "localhost"\nsmtpPort = ${smtp.port}\nsmtpUser = "sender"\nsmtpPassword = "smtp-secret"\n` +
          `fromAddress = "assistant@example.net"\n`,
      ),
    );
    const ca = join(testEnv.dir, "test-ca.pem");
    writeFileSync(ca, certificate.cert);
    running = await startProduct(testEnv, { env: { NODE_EXTRA_CA_CERTS: ca } });
  });
  afterAll(async () => {
    await running?.stop("SIGKILL");
    await smtp?.close();
    await dovecot?.stop();
    await fake?.close();
    await testEnv?.cleanup();
    if (certificate) removeCertificate(certificate.dir);
  });

  it("answers a mail from an address the owner's pattern covers, over STARTTLS, and the doctor sees both ways", async () => {
    const app = running!;
    await vi.waitFor(
      async () => {
        const checked = (await fetch(`http://127.0.0.1:${app.port}/health?deep=1`, {
          headers: { Authorization: basicAuthHeader(PASSWORD) },
        }).then((response) => response.json())) as Checked;
        const email = checked.checks.find((check) => check.name === "email");
        expect(email).toMatchObject({ state: "ok", detail: "mail comes in by imap; mail goes out by SMTP" });
      },
      { timeout: 30_000 },
    );
    fake.enqueue(textTurn("The plumber comes on Tuesday."));
    await dovecot.append(
      mail(
        {
          "Authentication-Results":
            "mx.test.example; dkim=pass header.d=example.org; dmarc=pass header.from=example.org",
          From: "Ada <ada.home@example.org>",
          Subject: "Plumber",
          "Message-ID": "<plumber@example.org>",
        },
        "When does the plumber come?",
      ),
    );
    await vi.waitFor(() => expect(smtp.mails).toHaveLength(1), { timeout: 30_000 });
    const [answer] = smtp.mails;
    expect(answer?.to).toEqual(["ada.home@example.org"]);
    expect(answer?.secure).toBe(true);
    expect(answer?.user).toBe("sender");
    expect(answer?.parsed.subject).toBe("Re: Plumber");
    expect(answer?.parsed.inReplyTo).toBe("<plumber@example.org>");
    expect(answer?.parsed.text?.trim()).toBe("The plumber comes on Tuesday.");
  });
});

import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { SMTPServer } from "smtp-server";
import { simpleParser, type ParsedMail } from "mailparser";

export interface CapturedMail {
  from: string;
  to: string[];
  parsed: ParsedMail;
  raw: string;
  /** Whether the session had switched to TLS (STARTTLS) when the mail was sent. */
  secure: boolean;
  user: string | undefined;
}

export interface SmtpCapture {
  port: number;
  mails: CapturedMail[];
  /** Closes the port (a server gone away) until `up()`. */
  down(): Promise<void>;
  up(): Promise<void>;
  close(): Promise<void>;
}

/** A certificate for 127.0.0.1 and localhost made now, self-signed: `cert` is also the CA to trust. */
export function makeCertificate(): { key: string; cert: string; dir: string } {
  const dir = mkdtempSync(join(tmpdir(), "smtp-cert-"));
  execFileSync(
    "openssl",
    [
      "req",
      "-x509",
      "-newkey",
      "rsa:2048",
      "-nodes",
      "-days",
      "2",
      "-subj",
      "/CN=localhost",
      "-addext",
      "subjectAltName=IP:127.0.0.1,DNS:localhost",
      "-keyout",
      join(dir, "key.pem"),
      "-out",
      join(dir, "cert.pem"),
    ],
    { stdio: "ignore" },
  );
  return {
    key: readFileSync(join(dir, "key.pem"), "utf8"),
    cert: readFileSync(join(dir, "cert.pem"), "utf8"),
    dir,
  };
}

/**
 * npm's `smtp-server` on loopback keeping every mail it is sent: AUTH (PLAIN/LOGIN with the one
 * user given) and, with a certificate, STARTTLS.
 */
export async function startSmtpCapture(options: {
  port: number;
  user: string;
  password: string;
  tls?: { key: string; cert: string };
}): Promise<SmtpCapture> {
  const mails: CapturedMail[] = [];
  let server: SMTPServer | undefined;
  const listen = async () => {
    server = new SMTPServer({
      secure: false,
      authMethods: ["PLAIN", "LOGIN"],
      allowInsecureAuth: !options.tls,
      ...(options.tls
        ? { key: options.tls.key, cert: options.tls.cert }
        : { disabledCommands: ["STARTTLS"] }),
      logger: false,
      onAuth(auth, _session, callback) {
        if (auth.username === options.user && auth.password === options.password)
          callback(null, { user: auth.username });
        else callback(new Error("Invalid username or password"));
      },
      onData(stream, session, callback) {
        const chunks: Buffer[] = [];
        stream.on("data", (chunk: Buffer) => chunks.push(chunk));
        stream.on("end", () => {
          const raw = Buffer.concat(chunks).toString("utf8");
          void simpleParser(raw).then((parsed) => {
            mails.push({
              from: session.envelope.mailFrom ? session.envelope.mailFrom.address : "",
              to: session.envelope.rcptTo.map((rcpt) => rcpt.address),
              parsed,
              raw,
              secure: session.secure,
              user: typeof session.user === "string" ? session.user : undefined,
            });
            callback();
          }, callback);
        });
      },
    });
    await new Promise<void>((resolve, reject) => {
      server!.once("error", reject);
      server!.listen(options.port, "127.0.0.1", () => resolve());
    });
  };
  const close = () => new Promise<void>((resolve) => (server ? server.close(() => resolve()) : resolve()));
  await listen();
  return {
    port: options.port,
    mails,
    down: close,
    up: listen,
    close,
  };
}

export function removeCertificate(dir: string): void {
  rmSync(dir, { recursive: true, force: true });
}

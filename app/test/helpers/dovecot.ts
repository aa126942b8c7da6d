import { execFileSync, spawnSync } from "node:child_process";
import {
  chmodSync,
  chownSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { tmpdir, userInfo } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { ImapFlow } from "imapflow";
import { freePort } from "@stavrobot/common/test-support";

/** Debian's `dovecot-imapd` (`.ci/run` installs it). */
export const DOVECOT = "/usr/sbin/dovecot";
export const hasDovecot = existsSync(DOVECOT);

export const MAIL_USER = "bot";
export const MAIL_PASSWORD = "mail-secret";

export interface Dovecot {
  port: number;
  /** Puts a mail into a mailbox, as a delivery would. */
  append(raw: string, mailbox?: string): Promise<void>;
  /** Stops the server (every connection drops) and starts it again on the same port. */
  restart(pauseMs?: number): Promise<void>;
  /** Deletes and creates a mailbox again: it gets a new UIDVALIDITY. */
  recreate(mailbox: string): Promise<void>;
  createMailbox(mailbox: string): Promise<void>;
  /** How many mails a mailbox holds. */
  count(mailbox: string): Promise<number>;
  stop(): Promise<void>;
  /** The server's log, for a failing test's message. */
  log(): string;
}

/**
 * A real IMAP server on loopback for one test file: Dovecot with its own configuration, state and
 * Maildir in a temporary folder, one user (`bot`), plain IMAP (loopback only). As root the mail
 * is kept as `nobody`; otherwise as the user running the tests.
 */
export async function startDovecot(): Promise<Dovecot> {
  const dir = mkdtempSync(join(tmpdir(), "dovecot-test-"));
  chmodSync(dir, 0o755);
  const port = await freePort();
  const root = process.getuid?.() === 0;
  const me = userInfo();
  const uid = root ? 65534 : me.uid;
  const gid = root ? 65534 : me.gid;
  for (const sub of ["run", "state", "home"]) mkdirSync(join(dir, sub));
  if (root) chownSync(join(dir, "home"), uid, gid);
  writeFileSync(join(dir, "passwd"), `${MAIL_USER}:{PLAIN}${MAIL_PASSWORD}::::::\n`);
  const conf = join(dir, "dovecot.conf");
  writeFileSync(
    conf,
    [
      "protocols = imap",
      "listen = 127.0.0.1",
      `base_dir = ${dir}/run`,
      `state_dir = ${dir}/state`,
      `instance_name = stavrobot-test-${port}`,
      `log_path = ${dir}/dovecot.log`,
      "ssl = no",
      "disable_plaintext_auth = no",
      "auth_mechanisms = plain login",
      "mail_location = maildir:~/Maildir",
      "first_valid_uid = 1",
      ...(root ? [] : [`default_internal_user = ${me.username}`, `default_login_user = ${me.username}`]),
      `passdb {\n  driver = passwd-file\n  args = scheme=PLAIN username_format=%u ${dir}/passwd\n}`,
      `userdb {\n  driver = static\n  args = uid=${uid} gid=${gid} home=${dir}/home/%u\n}`,
      `service imap-login {\n  chroot =\n  inet_listener imap {\n    address = 127.0.0.1\n    port = ${port}\n  }\n  inet_listener imaps {\n    port = 0\n  }\n}`,
      "service anvil {\n  chroot =\n}",
      "",
    ].join("\n"),
  );
  const start = async () => {
    // It goes to the background; its output is its log file (a pipe left open would hold this up).
    execFileSync(DOVECOT, ["-c", conf], { stdio: "ignore" });
    await waitForLogin();
  };
  const stopServer = async () => {
    spawnSync(DOVECOT, ["-c", conf, "stop"]);
    // The master removes its pid file once every process has gone.
    for (let i = 0; i < 100 && existsSync(join(dir, "run", "master.pid")); i++) await sleep(50);
  };
  const client = () =>
    new ImapFlow({
      host: "127.0.0.1",
      port,
      secure: false,
      doSTARTTLS: false,
      auth: { user: MAIL_USER, pass: MAIL_PASSWORD },
      logger: false,
    });
  const withClient = async (work: (imap: ImapFlow) => Promise<void>) => {
    const imap = client();
    await imap.connect();
    try {
      await work(imap);
    } finally {
      await imap.logout().catch(() => undefined);
    }
  };
  const waitForLogin = async () => {
    let lastError: unknown;
    for (let i = 0; i < 100; i++) {
      try {
        await withClient(async () => {});
        return;
      } catch (error) {
        lastError = error;
        await sleep(100);
      }
    }
    throw new Error(`dovecot did not start: ${String(lastError)}\n${readLog()}`);
  };
  const readLog = () =>
    existsSync(join(dir, "dovecot.log")) ? readFileSync(join(dir, "dovecot.log"), "utf8") : "";
  await start();
  return {
    port,
    append: (raw, mailbox = "INBOX") =>
      withClient(async (imap) => {
        await imap.append(mailbox, raw);
      }),
    async restart(pauseMs = 0) {
      await stopServer();
      await sleep(pauseMs);
      await start();
    },
    recreate: (mailbox) =>
      withClient(async (imap) => {
        await imap.mailboxDelete(mailbox);
        // UIDVALIDITY comes from the clock in seconds: a new one needs a later second.
        await sleep(1100);
        await imap.mailboxCreate(mailbox);
      }),
    createMailbox: (mailbox) =>
      withClient(async (imap) => {
        await imap.mailboxCreate(mailbox);
      }),
    async count(mailbox) {
      let messages = 0;
      await withClient(async (imap) => {
        const status = await imap.status(mailbox, { messages: true });
        messages = status ? (status.messages ?? 0) : 0;
      });
      return messages;
    },
    async stop() {
      await stopServer();
      rmSync(dir, { recursive: true, force: true });
    },
    log: readLog,
  };
}

/** A mail as text, CRLF line ends. */
export function mail(headers: Record<string, string | string[]>, body: string): string {
  const lines: string[] = [];
  for (const [name, value] of Object.entries(headers)) {
    for (const one of Array.isArray(value) ? value : [value]) lines.push(`${name}: ${one}`);
  }
  if (!Object.keys(headers).some((name) => name.toLowerCase() === "content-type")) {
    lines.push("MIME-Version: 1.0", "Content-Type: text/plain; charset=utf-8");
  }
  return `${lines.join("\r\n")}\r\n\r\n${body.replace(/\r?\n/g, "\r\n")}\r\n`;
}

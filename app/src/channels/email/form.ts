import { readFileSync } from "node:fs";
import { z } from "zod";
import {
  ConfigError,
  DomainError,
  SerialLock,
  errorMessage,
  readValidJson,
  type Router,
} from "@stavrobot/common";
import { setTableKeys, writeConfigFile } from "../../boot/config-edit.js";
import { parseConfig } from "../../boot/config.js";
import type { EmailConfig } from "./config.js";
import { imapClient, imapSettings } from "./imap.js";
import { smtpTransport } from "./smtp.js";

/** A text field: left out, kept as written; empty, removed from config.toml. */
const text = z.string().trim().max(500).optional();
const port = z.union([z.number().int().min(1).max(65535), z.literal("")]).optional();

const formSchema = z.strictObject({
  ownerEmail: text,
  imapHost: text,
  imapPort: port,
  imapTls: z.boolean().optional(),
  imapUser: text,
  /** Absent: the one in config.toml is kept; "": removed. */
  imapPassword: z.string().max(500).optional(),
  mailbox: text,
  moveTo: text,
  authservId: text,
  smtpHost: text,
  smtpPort: port,
  smtpUser: text,
  smtpPassword: z.string().max(500).optional(),
  fromAddress: text,
  /** Write it even when the servers did not answer as they should. */
  saveAnyway: z.boolean().default(false),
});

export interface ServerCheck {
  name: "imap" | "smtp";
  ok: boolean;
  detail: string;
}

const CHECK_TIMEOUT_MS = 10_000;

/** Logs in to the IMAP server and opens the mailbox, as the reader will. */
export async function checkImap(email: EmailConfig): Promise<ServerCheck> {
  const settings = imapSettings(email)!;
  const client = imapClient(settings, {
    connectionTimeout: CHECK_TIMEOUT_MS,
    greetingTimeout: CHECK_TIMEOUT_MS,
  });
  client.on("error", () => {});
  try {
    await client.connect();
    await client.mailboxOpen(settings.mailbox);
    return { name: "imap", ok: true, detail: `logged in to ${settings.host} and opened ${settings.mailbox}` };
  } catch (error) {
    const said = (error as { responseText?: string }).responseText;
    return { name: "imap", ok: false, detail: `${settings.host}: ${said ?? errorMessage(error)}` };
  } finally {
    await client.logout().catch(() => client.close());
  }
}

/** Connects to the SMTP server and logs in (no mail is sent). */
export async function checkSmtp(email: EmailConfig): Promise<ServerCheck> {
  const transport = smtpTransport(
    { host: email.smtpHost!, port: email.smtpPort, user: email.smtpUser, password: email.smtpPassword },
    { connectionTimeout: CHECK_TIMEOUT_MS, greetingTimeout: CHECK_TIMEOUT_MS },
  );
  try {
    await transport.verify();
    return { name: "smtp", ok: true, detail: `${email.smtpHost} took the login` };
  } catch (error) {
    return { name: "smtp", ok: false, detail: `${email.smtpHost}: ${errorMessage(error)}` };
  } finally {
    transport.close();
  }
}

export interface EmailFormDeps {
  configPath: string;
  /** Checks the servers (the tests' fakes may stand in). */
  check?: { imap: typeof checkImap; smtp: typeof checkSmtp };
}

function readFile(path: string): { text: string; email: EmailConfig | undefined; owner: string | undefined } {
  const text = readFileSync(path, "utf8");
  try {
    const config = parseConfig(text, path);
    return { text, email: config.email, owner: config.owner?.email };
  } catch (error) {
    if (error instanceof ConfigError)
      throw new DomainError("conflict", error.message, { reason: "invalid-config" });
    throw error;
  }
}

/**
 * `GET/PUT /api/settings/email/config` (owner's password): `[email]` and `[owner] email` as
 * config.toml has them (passwords only as whether one is set), and the owner's new settings,
 * checked by logging in to both servers before they are written (`saveAnyway` writes them
 * regardless). A password left out keeps the one written; they are used after a restart.
 */
export function addEmailFormRoutes(router: Router, deps: EmailFormDeps): void {
  const writes = new SerialLock();
  const check = deps.check ?? { imap: checkImap, smtp: checkSmtp };
  router
    .get("/api/settings/email/config", async () => {
      const { email, owner } = readFile(deps.configPath);
      return {
        json: {
          configured: email !== undefined,
          ownerEmail: owner ?? "",
          imapHost: email?.imapHost ?? "",
          imapPort: email?.imapPort ?? "",
          imapTls: email?.imapTls ?? true,
          imapUser: email?.imapUser ?? "",
          imapPasswordSet: email?.imapPassword !== undefined,
          mailbox: email?.mailbox ?? "INBOX",
          moveTo: email?.moveTo ?? "",
          authservId: email?.authservId ?? "",
          smtpHost: email?.smtpHost ?? "",
          smtpPort: email?.smtpPort ?? 587,
          smtpUser: email?.smtpUser ?? "",
          smtpPasswordSet: email?.smtpPassword !== undefined,
          fromAddress: email?.fromAddress ?? "",
          webhookSecretSet: email?.webhookSecret !== undefined,
        },
      };
    })
    .add("PUT", "/api/settings/email/config", async ({ req }) => {
      const form = await readValidJson(req, 16 * 1024, formSchema);
      return writes.run(async () => {
        const { text } = readFile(deps.configPath);
        // A field left out is kept as written; an empty one is removed.
        const { saveAnyway, ownerEmail, ...fields } = form;
        const changes: Record<string, string | number | boolean | undefined> = {};
        for (const [key, field] of Object.entries(fields)) {
          if (field !== undefined) changes[key] = field === "" ? undefined : field;
        }
        let next = setTableKeys(text, "email", changes);
        if (ownerEmail !== undefined) next = setTableKeys(next, "owner", { email: ownerEmail || undefined });
        let email: EmailConfig | undefined;
        try {
          email = parseConfig(next, deps.configPath).email;
        } catch (error) {
          if (error instanceof ConfigError) throw new DomainError("invalid", `Not saved: ${error.message}`);
          throw error;
        }
        const checks = email
          ? await Promise.all([
              ...(email.imapHost ? [check.imap(email)] : []),
              ...(email.smtpHost ? [check.smtp(email)] : []),
            ])
          : [];
        const failed = checks.filter((one) => !one.ok);
        if (failed.length > 0 && !saveAnyway) {
          throw new DomainError(
            "conflict",
            `Not saved: ${failed.map((one) => `${one.name.toUpperCase()}: ${one.detail}`).join("; ")}. Correct it, or save anyway.`,
            { checks },
          );
        }
        writeConfigFile(deps.configPath, next);
        return {
          json: {
            saved: true,
            checks,
            restartNeeded: true,
            message: `Saved in config.toml${failed.length > 0 ? ", unchecked" : checks.length > 0 ? " and checked" : ""}. It is used after a restart.`,
          },
        };
      });
    });
}

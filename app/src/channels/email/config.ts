import { z } from "zod";

/** Hosts that stay on this machine: the only ones IMAP may be read from without TLS. */
export function isLoopbackHost(host: string): boolean {
  return host === "localhost" || host === "::1" || host === "[::1]" || /^127\.\d+\.\d+\.\d+$/.test(host);
}

const address = z.string().regex(/^[^\s@]+@[^\s@]+$/, "must be an email address");

/**
 * `[email]`: the reference's keys (a webhook in, SMTP out) keep their meaning; IMAP is the inbound
 * a self-hoster points at a mailbox of their own. Each half is optional: without `imapHost` and
 * `webhookSecret` nothing comes in, without `smtpHost` nothing goes out.
 */
export const emailSchema = z
  .strictObject({
    webhookSecret: z.string().min(16, "must be at least 16 characters").optional(),
    smtpHost: z.string().min(1).optional(),
    smtpPort: z.number().int().min(1).max(65535).default(587),
    smtpUser: z.string().min(1).optional(),
    smtpPassword: z.string().min(1).optional(),
    fromAddress: address.optional(),
    imapHost: z.string().min(1).optional(),
    imapPort: z.number().int().min(1).max(65535).optional(),
    imapUser: z.string().min(1).optional(),
    imapPassword: z.string().min(1).optional(),
    imapTls: z.boolean().default(true),
    mailbox: z.string().min(1).default("INBOX"),
    moveTo: z.string().min(1).optional(),
    authservId: z.string().min(1).optional(),
  })
  .superRefine((email, ctx) => {
    if (email.smtpHost && !email.fromAddress) {
      ctx.addIssue({ code: "custom", path: ["fromAddress"], message: "is needed to send (smtpHost is set)" });
    }
    if (email.imapHost) {
      for (const key of ["imapUser", "imapPassword"] as const) {
        if (!email[key])
          ctx.addIssue({ code: "custom", path: [key], message: "is needed to read (imapHost is set)" });
      }
      if (!email.imapTls && !isLoopbackHost(email.imapHost)) {
        ctx.addIssue({
          code: "custom",
          path: ["imapTls"],
          message:
            "may be false only for a server on this machine (127.0.0.1, localhost): the password would cross the network in clear",
        });
      }
    }
  });

export type EmailConfig = z.infer<typeof emailSchema>;

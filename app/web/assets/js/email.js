// The Email page: mail from an allowed address whose sender the mail server did not prove, each
// with why, to let through once, let that address through always, or dismiss.
import { api, postJson } from "./lib/api.js";
import { busy, byId, el, fill, showError } from "./lib/dom.js";
import { restartAssistant } from "./lib/restart.js";

const errorBox = byId("email-error");
const status = byId("email-status");

async function load() {
  try {
    const { waiting } = await api("/api/settings/email/waiting");
    render(waiting);
  } catch (error) {
    // Without [email] there is no waiting list yet.
    if (error.status === 404)
      fill(byId("waiting"), el("p", { class: "muted", text: "Email is not set up yet." }));
    else showError(errorBox, error);
  }
}

function render(waiting) {
  if (waiting.length === 0) {
    fill(byId("waiting"), el("p", { class: "muted", text: "No mail waits." }));
    return;
  }
  fill(
    byId("waiting"),
    el(
      "ul",
      { class: "cards" },
      ...waiting.map((mail) =>
        el(
          "li",
          { class: "card", "data-mail": String(mail.id) },
          el("strong", { text: mail.sender }),
          el("div", { text: mail.subject || "(no subject)" }),
          el("div", { class: "hint", text: `${new Date(mail.receivedAt).toLocaleString()}: ${mail.reason}` }),
          el(
            "div",
            { class: "actions" },
            button("Let through once", mail, "once"),
            button("Always let this address through", mail, "always"),
            button("Dismiss", mail, "dismiss"),
          ),
        ),
      ),
    ),
  );
}

function button(text, mail, action) {
  const node = el("button", { type: "button", text, "data-action": action });
  node.addEventListener("click", () =>
    busy(node, async () => {
      try {
        const { result } = await postJson(`/api/settings/email/waiting/${mail.id}`, { action });
        status.textContent =
          action === "dismiss"
            ? `Dismissed the mail from ${mail.sender}.`
            : result === "accepted"
              ? `The mail from ${mail.sender} went to the assistant.`
              : `The mail from ${mail.sender} was let through, but nobody answers that address (see the People page).`;
        await load();
      } catch (error) {
        showError(errorBox, error);
      }
    }),
  );
  return node;
}

const form = byId("email-form");
const fields = {
  ownerEmail: "owner-email",
  imapHost: "imap-host",
  imapPort: "imap-port",
  imapUser: "imap-user",
  mailbox: "mailbox",
  moveTo: "move-to",
  authservId: "authserv-id",
  smtpHost: "smtp-host",
  smtpPort: "smtp-port",
  smtpUser: "smtp-user",
  fromAddress: "from-address",
};

async function loadSettings() {
  try {
    const settings = await api("/api/settings/email/config");
    for (const [key, id] of Object.entries(fields)) byId(id).value = String(settings[key] ?? "");
    byId("imap-tls").checked = settings.imapTls;
    byId("imap-password-state").textContent = settings.imapPasswordSet ? "A password is saved." : "";
    byId("smtp-password-state").textContent = settings.smtpPasswordSet ? "A password is saved." : "";
  } catch (error) {
    showError(byId("email-form-error"), error);
  }
}

async function save(anyway) {
  const status = byId("email-form-status");
  const problem = byId("email-form-error");
  showError(problem);
  status.textContent = "Trying the servers…";
  const body = { imapTls: byId("imap-tls").checked, saveAnyway: anyway };
  for (const [key, id] of Object.entries(fields)) {
    const value = byId(id).value.trim();
    body[key] = key.endsWith("Port") ? (value === "" ? "" : Number(value)) : value;
  }
  for (const key of ["imapPassword", "smtpPassword"]) {
    const value = byId(key === "imapPassword" ? "imap-password" : "smtp-password").value;
    if (value !== "") body[key] = value;
  }
  try {
    const saved = await api("/api/settings/email/config", { method: "PUT", body });
    status.textContent = saved.message;
    byId("email-save-anyway").hidden = true;
    byId("email-restart").hidden = false;
    byId("imap-password").value = "";
    byId("smtp-password").value = "";
    await loadSettings();
  } catch (error) {
    status.textContent = "";
    showError(problem, error);
    byId("email-save-anyway").hidden = error.status !== 409;
  }
}

form.addEventListener("submit", (event) => {
  event.preventDefault();
  void busy(byId("email-save"), () => save(false));
});
byId("email-save-anyway").addEventListener(
  "click",
  () => void busy(byId("email-save-anyway"), () => save(true)),
);
byId("email-restart").addEventListener("click", () => {
  const status = byId("email-form-status");
  status.textContent = "Restarting the assistant…";
  void busy(byId("email-restart"), async () => {
    try {
      await restartAssistant();
      status.textContent = "Restarted: the mailbox settings are in use.";
      byId("email-restart").hidden = true;
      await load();
    } catch (error) {
      status.textContent = "";
      showError(byId("email-form-error"), error);
    }
  });
});

void load();
void loadSettings();

// The home page: status of the services, channels, queue and messages (refreshed while the page
// is visible), and the chat panel with the recent conversation. (Answers kept for the owner are
// the notifications every page lists: kept-answers.js.)
import { api } from "./lib/api.js";
import { busy, byId, el, fill, showError } from "./lib/dom.js";
import { formatDuration, formatInteger } from "./lib/format.js";
import { mountChat } from "./chat.js";
import { showProviderBanner } from "./provider-banner.js";

const REFRESH_MS = 10_000;
/** The doctor asks the provider and Telegram too: less often than the status. */
const CHECKS_REFRESH_MS = 60_000;
const CHECK_LABELS = { ok: "ok", warn: "look", fail: "failing" };

const facts = (node, pairs) =>
  fill(
    node,
    pairs.flatMap(([term, value]) => [el("dt", { text: term }), el("dd", {}, value)]),
  );

const state = (ok, yes, no) => el("span", { class: ok ? "badge ok" : "badge bad", text: ok ? yes : no });

function showStatus(status) {
  fill(
    byId("services"),
    status.services.map((service) =>
      el(
        "li",
        { "data-service": service.name },
        el(
          "span",
          {},
          el("strong", { text: service.name }),
          service.detail ? el("div", { class: "hint", text: service.detail }) : null,
        ),
        // Answering but not doing its job (the bridge up, its signal-cli missing): not green.
        service.warning
          ? el("span", { class: "badge warn", text: service.warning })
          : state(service.ok, "up", "down"),
      ),
    ),
  );
  const { telegram, signal, whatsapp, email } = status.channels;
  facts(byId("channels"), [
    ["Telegram", telegramState(telegram)],
    ["Signal", signalState(signal)],
    ["WhatsApp", whatsappState(whatsapp)],
    ["Email", emailState(email)],
  ]);
  const { deliveries } = status.queue;
  facts(byId("queue"), [
    ["State", status.queue.busy ? `busy (message ${status.queue.currentInboxId ?? "?"})` : "idle"],
    ["Waiting", formatInteger(status.queue.waiting)],
    ...Object.entries(status.queue.open)
      .filter(([name]) => name !== "pending")
      .map(([name, count]) => [name, formatInteger(count)]),
    // Outgoing Telegram and Signal messages: what waits, and why when its channel fails.
    [
      "To send",
      el(
        "span",
        { "data-deliveries": "waiting" },
        formatInteger(deliveries.waiting),
        deliveries.failing
          ? el("div", {
              class: "warn",
              text: `${channelTitle(deliveries.failing.channel)} could not deliver: ${deliveries.failing.error}`,
            })
          : null,
      ),
    ],
    ...(deliveries.givenUp > 0
      ? [["Not sent (7 days)", el("span", { class: "bad", text: formatInteger(deliveries.givenUp) })]]
      : []),
    ["Up for", formatDuration(status.uptimeSeconds)],
  ]);
  facts(byId("messages"), [
    ["Total", formatInteger(status.messages.total)],
    ...status.messages.bySource.map((entry) => [entry.source, formatInteger(entry.count)]),
  ]);
}

const channelTitle = (channel) =>
  ({ telegram: "Telegram", signal: "Signal", whatsapp: "WhatsApp", email: "Email" })[channel] ?? channel;

function emailState(email) {
  if (!email?.configured) return el("span", { class: "muted", text: "not configured" });
  const inbound = { imap: "IMAP", webhook: "webhook", none: "nothing in" }[email.inbound] ?? email.inbound;
  const ways = `${inbound}, ${email.outbound ? "SMTP out" : "nothing out"}`;
  return el(
    "span",
    {},
    email.inbound === "imap" && !email.connected
      ? state(false, "", `mailbox not reachable (${ways})`)
      : state(true, ways, ""),
    email.problem ? el("div", { class: "hint", text: email.problem }) : null,
    email.waiting > 0
      ? el(
          "div",
          { class: "warn" },
          el("a", { href: "/settings/email", text: `${email.waiting} mail(s) wait for you` }),
        )
      : null,
  );
}

function signalState(signal) {
  if (!signal.configured) return el("span", { class: "muted", text: "not configured" });
  if (!signal.bridgeOk) return state(false, "", "bridge down");
  if (signal.signalCli === "running") return state(true, "up", "");
  return el(
    "span",
    {},
    state(false, "", `bridge up, signal-cli ${signal.signalCli}`),
    signal.problem ? el("div", { class: "hint", text: signal.problem }) : null,
  );
}

function whatsappState(whatsapp) {
  if (!whatsapp?.configured) return el("span", { class: "muted", text: "not configured" });
  if (!whatsapp.bridgeOk) return state(false, "", "bridge down");
  const details = [
    whatsapp.account ? `number ${whatsapp.account}` : "",
    whatsapp.lastInbound ? `last message in ${new Date(whatsapp.lastInbound).toLocaleString()}` : "",
  ].filter(Boolean);
  return el(
    "span",
    { "data-whatsapp": whatsapp.whatsapp },
    whatsapp.whatsapp === "open"
      ? state(true, "open", "")
      : state(false, "", `WhatsApp ${whatsapp.whatsapp}`),
    details.length > 0 ? el("div", { class: "hint", text: details.join(", ") }) : null,
    whatsapp.problem ? el("div", { class: "hint", text: whatsapp.problem }) : null,
    whatsapp.lastError && whatsapp.whatsapp !== "open"
      ? el("div", { class: "hint", text: `last error: ${whatsapp.lastError}` })
      : null,
    whatsapp.whatsapp === "open"
      ? null
      : el("div", {}, el("a", { href: "/settings/whatsapp", text: "Open the WhatsApp page" })),
  );
}

function telegramState(telegram) {
  if (!telegram.configured) return el("span", { class: "muted", text: "not configured" });
  const webhook = telegram.webhook;
  if ("error" in webhook)
    return el("span", { class: "bad", text: `Telegram did not answer: ${webhook.error}` });
  return el(
    "span",
    {},
    state(webhook.registered, "webhook registered", "webhook not registered"),
    webhook.pendingUpdates > 0 ? ` ${formatInteger(webhook.pendingUpdates)} updates waiting` : null,
    webhook.lastError ? el("div", { class: "hint", text: `Last error: ${webhook.lastError}` }) : null,
  );
}

function showChecks(checked) {
  showProviderBanner(byId("provider-banner"), checked);
  const failing = checked.checks.filter((check) => check.state === "fail").length;
  byId("checks-summary").textContent =
    failing > 0
      ? `${failing} failing`
      : checked.status === "warn"
        ? "working; some need a look"
        : "everything works";
  fill(
    byId("checks"),
    checked.checks.map((check) =>
      el(
        "li",
        { "data-check": check.name },
        el(
          "span",
          {},
          el("strong", { text: check.name }),
          el("div", { class: "hint", text: check.detail }),
          check.fix && check.state !== "ok"
            ? el("div", { class: check.state, text: `→ ${check.fix}` })
            : null,
        ),
        el("span", {
          class: `badge ${check.state === "fail" ? "bad" : check.state}`,
          text: CHECK_LABELS[check.state],
        }),
      ),
    ),
  );
}

async function refreshChecks() {
  try {
    showChecks(await api("/api/checks"));
  } catch (error) {
    fill(byId("checks"), [el("li", { class: "error", text: error.message })]);
  }
}

async function refreshStatus() {
  try {
    showStatus(await api("/api/status"));
    showError(byId("status-error"));
  } catch (error) {
    showError(byId("status-error"), error);
  }
}

mountChat({
  log: byId("chat-log"),
  form: byId("chat-form"),
  input: byId("chat-input"),
  stop: byId("chat-stop"),
});

/** The calls the trust gate stopped, each with its approve-once and deny buttons. */
async function refreshApprovals() {
  let pending;
  try {
    ({ pending } = await api("/api/approvals"));
    showError(byId("approvals-error"));
  } catch (error) {
    showError(byId("approvals-error"), error);
    return;
  }
  byId("approvals-card").hidden = pending.length === 0 && byId("approvals-error").hidden;
  fill(
    byId("approvals"),
    pending.map((approval) => {
      const decide = (decision) => async (event) =>
        busy(event.currentTarget, async () => {
          try {
            await api(`/api/approvals/${approval.id}`, { method: "POST", body: { decision } });
          } catch (error) {
            showError(byId("approvals-error"), error);
          }
          await refreshApprovals();
        });
      return el(
        "li",
        { "data-approval": String(approval.id) },
        el(
          "span",
          {},
          el("strong", { text: `Request ${approval.id}: ${approval.tool}` }),
          el("div", { class: "hint", text: `after reading text from ${approval.askedBy}` }),
          el("pre", { class: "args", text: JSON.stringify(approval.args, null, 2) }),
        ),
        el(
          "span",
          { class: "actions" },
          el("button", {
            type: "button",
            class: "primary",
            text: "Approve once",
            on: { click: decide("approve") },
          }),
          el("button", { type: "button", class: "danger", text: "Deny", on: { click: decide("deny") } }),
        ),
      );
    }),
  );
}

void refreshChecks();
void refreshApprovals();
await refreshStatus();
setInterval(() => {
  if (document.visibilityState === "visible") {
    void refreshStatus();
    void refreshApprovals();
  }
}, REFRESH_MS);
setInterval(() => {
  if (document.visibilityState === "visible") void refreshChecks();
}, CHECKS_REFRESH_MS);

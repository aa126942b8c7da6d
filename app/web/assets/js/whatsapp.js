// The WhatsApp page: the connection's state, linking with a QR code (an SVG image the app draws;
// it rotates, so the page asks again every few seconds) or a pairing code, and unlinking.
import { api } from "./lib/api.js";
import { busy, byId, showError } from "./lib/dom.js";

const errorBox = byId("whatsapp-error");
const qrImage = byId("whatsapp-qr");
const codeBox = byId("whatsapp-code");
const REFRESH_MS = 3_000;
let timer;
// Who put the error up: the refresh clears only its own, so a refused link stays readable.
let errorFrom;

function showProblem(from, error) {
  errorFrom = error === undefined ? undefined : from;
  showError(errorBox, error);
}

const LABELS = {
  unlinked: "not linked",
  qr: "waiting for the QR code to be scanned",
  code: "waiting for the pairing code to be typed",
  connecting: "connecting",
  open: "open",
  loggedOut: "logged out by the phone: link it again",
  replaced: "replaced by another session (stopped)",
  outdated: "refused as an outdated version",
  failing: "failing (retrying)",
};

function render(status) {
  byId("whatsapp-state").textContent = LABELS[status.whatsapp] ?? status.whatsapp;
  byId("whatsapp-state").dataset.state = status.whatsapp;
  byId("whatsapp-problem").textContent = status.problem ?? "";
  const details = [
    status.account ? `Number: ${status.account}` : "",
    status.lastInbound ? `Last message in: ${new Date(status.lastInbound).toLocaleString()}` : "",
    status.lastError ? `Last error: ${status.lastError}` : "",
  ].filter(Boolean);
  byId("whatsapp-details").textContent = details.join(" · ");
  const linked =
    status.whatsapp === "open" || status.whatsapp === "connecting" || status.whatsapp === "failing";
  byId("whatsapp-link").hidden = status.whatsapp === "open";
  byId("whatsapp-unlink-card").hidden =
    !linked && status.whatsapp !== "replaced" && status.whatsapp !== "outdated";
  if (status.hasQr) {
    // A new address each time: the browser fetches the code as it is now.
    qrImage.src = `/api/settings/whatsapp/qr.svg?at=${Date.now()}`;
    qrImage.hidden = false;
  } else {
    qrImage.hidden = true;
    qrImage.removeAttribute("src");
  }
  codeBox.hidden = !status.code;
  codeBox.textContent = status.code ? `Pairing code: ${status.code}` : "";
}

async function load() {
  clearTimeout(timer);
  try {
    render(await api("/api/settings/whatsapp"));
    if (errorFrom === "refresh") showProblem("refresh", undefined);
  } catch (error) {
    if (error.status === 404) {
      byId("whatsapp-state").textContent = "not set up";
      byId("whatsapp-problem").textContent =
        "Add an empty [whatsapp] table to config.toml (see config.example.toml) and restart; linking appears here.";
      return;
    }
    if (errorFrom !== "action") showProblem("refresh", error);
  }
  timer = setTimeout(load, REFRESH_MS);
}

async function act(button, path, body) {
  await busy(button, async () => {
    try {
      render(await api(path, { method: "POST", body }));
      showProblem("action", undefined);
    } catch (error) {
      showProblem("action", error);
    }
  });
  void load();
}

byId("whatsapp-link-qr").addEventListener("click", (event) =>
  act(event.currentTarget, "/api/settings/whatsapp/link", { method: "qr" }),
);
byId("whatsapp-code-form").addEventListener("submit", (event) => {
  event.preventDefault();
  const phoneNumber = byId("whatsapp-number").value.replace(/[\s().-]/g, "");
  act(event.submitter ?? event.currentTarget, "/api/settings/whatsapp/link", { method: "code", phoneNumber });
});
byId("whatsapp-unlink").addEventListener("click", (event) => {
  if (!confirm("Unlink WhatsApp? The assistant stops receiving and sending there until it is linked again."))
    return;
  act(event.currentTarget, "/api/settings/whatsapp/unlink", {});
});

void load();

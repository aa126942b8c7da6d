// The provider subscription page: follows the running sign-in over Server-Sent Events
// (/login/events) and sends the answer to its question to /login/respond. Everything shown is set
// as text, never as HTML.

const $ = (id) => document.getElementById(id);

let providerName = "the provider";
let finished = false;

function show(id, visible) {
  $(id).hidden = !visible;
}

function setStatus(text) {
  $("status").textContent = text;
}

/** Only web addresses become links (never javascript: and the like). */
function safeUrl(url) {
  try {
    const parsed = new URL(url);
    return parsed.protocol === "https:" || parsed.protocol === "http:" ? parsed.href : undefined;
  } catch {
    return undefined;
  }
}

function end(message, ok) {
  finished = true;
  show("auth", false);
  show("prompt", false);
  show("progress", false);
  const done = $("done-message");
  done.textContent = message;
  done.className = ok ? "ok" : "error";
  show("done", true);
  show("again", !ok);
  setStatus(ok ? "Done." : "The sign-in did not complete.");
}

const events = new EventSource("/login/events");

events.addEventListener("start", (event) => {
  const data = JSON.parse(event.data);
  providerName = data.name;
  setStatus(`Signing in to ${providerName}.`);
});

events.addEventListener("auth", (event) => {
  const data = JSON.parse(event.data);
  const link = $("auth-link");
  const url = safeUrl(data.url);
  if (url) link.href = url;
  link.textContent = `Open the ${providerName} sign-in page`;
  $("auth-instructions").textContent = data.instructions ?? "";
  show("auth", true);
});

events.addEventListener("prompt", (event) => {
  const data = JSON.parse(event.data);
  $("prompt-label").textContent = data.message;
  const input = $("prompt-input");
  input.placeholder = data.placeholder ?? "";
  input.required = !data.allowEmpty;
  input.value = "";
  show("prompt-error", false);
  show("prompt", true);
});

events.addEventListener("progress", (event) => {
  $("progress").textContent = JSON.parse(event.data).message;
  show("progress", true);
});

events.addEventListener("success", (event) => {
  events.close();
  const data = JSON.parse(event.data);
  end(`Signed in to ${data.name}. The assistant uses this subscription from its next message on.`, true);
});

// Nothing to sign in to with this configuration (no authFile, or a provider without a
// subscription login): said plainly, as what to set, since nothing went wrong.
events.addEventListener("unavailable", (event) => {
  events.close();
  finished = true;
  show("auth", false);
  show("prompt", false);
  show("progress", false);
  const status = $("status");
  status.textContent = JSON.parse(event.data).message;
  status.className = "";
});

events.addEventListener("failure", (event) => {
  events.close();
  end(JSON.parse(event.data).message, false);
});

// The browser reconnects by itself, and the server replays the login's state.
events.addEventListener("error", () => {
  if (!finished) setStatus("Connection lost; reconnecting…");
});

$("prompt-form").addEventListener("submit", async (event) => {
  event.preventDefault();
  const error = $("prompt-error");
  show("prompt-error", false);
  let response;
  try {
    response = await fetch("/login/respond", {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ value: $("prompt-input").value }),
    });
  } catch {
    error.textContent = "The assistant could not be reached; try again.";
    show("prompt-error", true);
    return;
  }
  if (response.ok) {
    show("prompt", false);
    return;
  }
  const body = await response.json().catch(() => ({}));
  error.textContent = body.error ?? `The answer was not taken (HTTP ${response.status}).`;
  show("prompt-error", true);
});

$("again").addEventListener("click", () => window.location.reload());

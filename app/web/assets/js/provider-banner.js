// Home's banner while no provider works: the assistant cannot answer until one does, and the
// Settings page is where to set it; when one saved there waits for a restart, the banner says so
// and restarts the assistant. Fed by the checks Home already asks for (`GET /api/checks`).
import { busy, el, fill } from "./lib/dom.js";
import { restartAssistant } from "./lib/restart.js";

/** Shows the banner when the provider check fails, and hides it once it passes. */
export function showProviderBanner(node, checked) {
  const provider = checked.checks.find((check) => check.name === "provider");
  if (!provider || provider.state !== "fail") {
    node.hidden = true;
    fill(node);
    return;
  }
  if (provider.restartNeeded) {
    const said = el("div", { class: "hint", role: "status" });
    const button = el("button", {
      type: "button",
      class: "primary",
      id: "provider-banner-restart",
      text: "Restart now",
    });
    button.addEventListener("click", () =>
      busy(button, async () => {
        fill(said, "Restarting the assistant…");
        try {
          await restartAssistant();
          location.reload();
        } catch (error) {
          fill(said, error.message);
        }
      }),
    );
    fill(
      node,
      el("strong", { text: "The provider saved on the Settings page is used after a restart." }),
      el("div", { text: "Until then it uses the provider it started with, which does not work." }),
      el("div", { class: "actions" }, button),
      said,
    );
    node.hidden = false;
    return;
  }
  fill(
    node,
    el("strong", { text: "The assistant cannot answer yet: no model provider works." }),
    el("div", { text: provider.detail }),
    el("div", {}, "Set the provider and its key on ", el("a", { href: "/settings", text: "Settings" }), "."),
  );
  node.hidden = false;
}

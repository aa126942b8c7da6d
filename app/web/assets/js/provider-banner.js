// Home's banner while no provider works: the assistant cannot answer until one does, and the
// Settings page is where to set it. Fed by the checks Home already asks for (`GET /api/checks`).
import { el, fill } from "./lib/dom.js";

/** Shows the banner when the provider check fails, and hides it once it passes. */
export function showProviderBanner(node, checked) {
  const provider = checked.checks.find((check) => check.name === "provider");
  if (!provider || provider.state !== "fail") {
    node.hidden = true;
    fill(node);
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

// The Skills page: install by URL, and for each installed skill its source, version and status,
// its text on demand, and the owner's decisions (approve what is installed now, disable, enable,
// remove). Approving sends the content hash that was shown, so a skill that changed meanwhile is
// not approved unseen.
import { api, postJson } from "./lib/api.js";
import { busy, byId, el, fill, showError } from "./lib/dom.js";
import { formatDateTime } from "./lib/format.js";

const STATUS = {
  approved: "approved",
  pending: "waits for your approval",
  changed: "changed since you approved it: waits for your approval",
  disabled: "disabled",
};

async function load() {
  try {
    const { skills, fromPlugins } = await api("/api/settings/skills");
    showError(byId("skills-error"));
    fill(
      byId("skills"),
      skills.length === 0 ? el("p", { class: "muted", text: "No skills are installed." }) : skills.map(card),
    );
    fill(
      byId("plugin-skills"),
      fromPlugins.length === 0
        ? el("p", { class: "muted", text: "None." })
        : el(
            "ul",
            { class: "list" },
            fromPlugins.map((skill) =>
              el(
                "li",
                { "data-plugin-skill": `${skill.plugin}/${skill.name}` },
                `${skill.plugin}/${skill.name}: ${skill.description}`,
              ),
            ),
          ),
    );
  } catch (error) {
    showError(byId("skills-error"), error);
  }
}

function card(skill) {
  const status = el("p", { class: "hint", role: "status" });
  const text = el("div", { class: "skill-text" });
  const act = (path, body, button) =>
    busy(button, async () => {
      try {
        await postJson(`/api/settings/skills/${path}`, body);
        await load();
      } catch (error) {
        fill(status, error.message);
      }
    });
  const button = (label, path, body, kind) => {
    const node = el("button", { type: "button", class: kind, text: label, "data-action": path });
    node.addEventListener("click", () => void act(path, body, node));
    return node;
  };
  const waiting = skill.status === "pending" || skill.status === "changed";
  const details = el(
    "details",
    { class: "card", "data-skill": skill.name, open: waiting },
    el(
      "summary",
      {},
      el("span", { class: "plugin-name", text: skill.name }),
      el("span", {
        class: waiting ? "badge warn" : "badge",
        "data-status": skill.status,
        text: STATUS[skill.status],
      }),
      skill.version ? el("span", { class: "badge", text: `version ${skill.version}` }) : null,
    ),
    el("p", { class: "muted", text: skill.description }),
    el(
      "p",
      { class: "hint" },
      `From ${skill.source}`,
      skill.author ? ` · by ${skill.author}` : "",
      ` · installed ${formatDateTime(skill.updatedAt)}`,
      skill.approvedAt
        ? ` · approved ${formatDateTime(skill.approvedAt)} (version ${skill.approvedVersion ?? "–"})`
        : "",
    ),
    el(
      "div",
      { class: "actions" },
      waiting ? button("Approve", "approve", { name: skill.name, hash: skill.hash }, "primary") : null,
      skill.status === "approved" ? button("Disable", "disable", { name: skill.name }) : null,
      skill.status === "disabled" ? button("Enable", "enable", { name: skill.name }) : null,
      button("Remove", "remove", { name: skill.name }, "danger"),
    ),
    status,
    text,
  );
  let shown = false;
  details.addEventListener("toggle", () => {
    if (details.open && !shown) void showText(skill.name, text).then(() => (shown = true));
  });
  if (waiting) void showText(skill.name, text).then(() => (shown = true));
  return details;
}

/** The skill's text as it is installed (plain text: what the assistant would read). */
async function showText(name, node) {
  try {
    const { text, files } = await api(`/api/settings/skills/${encodeURIComponent(name)}`);
    fill(
      node,
      el("pre", { class: "skill-source", text }),
      files.length > 0
        ? el("p", {
            class: "hint",
            text: `Other files: ${files.map((file) => `${file.path} (${file.bytes} bytes)`).join(", ")}`,
          })
        : null,
    );
  } catch (error) {
    fill(node, el("p", { class: "error", text: error.message }));
  }
}

byId("skill-install-form").addEventListener("submit", (event) => {
  event.preventDefault();
  const input = byId("skill-install-url");
  void busy(byId("skill-install-button"), async () => {
    try {
      showError(byId("skill-install-error"));
      const answer = await postJson("/api/settings/skills/install", { url: input.value.trim() });
      fill(
        byId("skill-install-status"),
        answer.unchanged
          ? `"${answer.name}" is installed already, unchanged.`
          : `Installed "${answer.name}". Read it below, then approve it.`,
      );
      input.value = "";
      await load();
    } catch (error) {
      showError(byId("skill-install-error"), error);
    }
  });
});

void load();

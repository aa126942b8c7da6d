// The People page: interlocutors with their identities and agent, agents with their instructions
// and whitelists, and each agent's conversation. Changes go through the same checks as the
// model's manage_interlocutors and manage_agents tools (POST /api/people/...).
import { api, postJson } from "./lib/api.js";
import { busy, byId, el, fill, showError } from "./lib/dom.js";

let agents = [];

function agentName(id) {
  const agent = agents.find((candidate) => candidate.id === id);
  return agent ? `${agent.name} (ID: ${agent.id})` : "none";
}

async function change(path, body, done) {
  byId("people-status").textContent = "";
  try {
    const answer = await postJson(path, body);
    render(answer);
    showError(byId("people-error"));
    byId("people-status").textContent = done ?? "Saved.";
    return true;
  } catch (error) {
    showError(byId("people-error"), error);
    return false;
  }
}

function interlocutorRow(person) {
  const identities = person.identities.map((identity) =>
    el(
      "span",
      { class: "badge" },
      `${identity.service} ${identity.identifier}`,
      person.owner
        ? null
        : el("button", {
            type: "button",
            class: "danger small",
            text: "×",
            "aria-label": `Remove ${identity.service} ${identity.identifier}`,
            on: {
              click: () =>
                change("/api/people/interlocutors", {
                  action: "remove_identity",
                  id: person.id,
                  service: identity.service,
                  identifier: identity.identifier,
                }),
            },
          }),
    ),
  );
  const select = el(
    "select",
    { "aria-label": `Agent of ${person.display_name}`, disabled: person.owner },
    el("option", { value: "0", text: "no agent" }),
    // Only the owner is handled by the main agent.
    agents
      .filter((agent) => person.owner || agent.id !== 1 || agent.id === person.agent_id)
      .map((agent) =>
        el("option", {
          value: String(agent.id),
          text: agentName(agent.id),
          selected: agent.id === person.agent_id,
        }),
      ),
  );
  select.addEventListener("change", () =>
    change("/api/people/interlocutors", { action: "update", id: person.id, agent_id: Number(select.value) }),
  );
  return el(
    "li",
    { class: "row" },
    el("strong", { text: person.display_name }),
    person.owner ? el("span", { class: "badge ok", text: "you" }) : null,
    person.enabled ? null : el("span", { class: "badge bad", text: "disabled" }),
    identities,
    select,
    person.owner
      ? el("span", { class: "muted small", text: "from config.toml" })
      : el("button", {
          type: "button",
          text: person.enabled ? "Disable" : "Enable",
          on: {
            click: () =>
              change("/api/people/interlocutors", {
                action: "update",
                id: person.id,
                enabled: !person.enabled,
              }),
          },
        }),
  );
}

function agentRow(agent) {
  return el(
    "li",
    { class: "stack" },
    el(
      "div",
      { class: "row" },
      el("strong", { text: `${agent.name} (ID: ${agent.id})` }),
      agent.id === 1 ? el("span", { class: "badge ok", text: "main agent" }) : null,
    ),
    agent.id === 1
      ? el("p", { class: "muted small", text: "Yours: every tool, your memories and your conversation." })
      : [
          el("p", { class: "small", text: agent.system_prompt || "(no instructions)" }),
          el("p", {
            class: "muted small",
            text: `Tools: ${agent.allowed_tools.join(", ") || "none"} · Plugins: ${agent.allowed_plugins.join(", ") || "none"}`,
          }),
        ],
    el(
      "div",
      { class: "actions" },
      el("button", {
        type: "button",
        text: "Read conversation",
        on: { click: () => readConversation(agent) },
      }),
      agent.id === 1
        ? null
        : el("button", { type: "button", text: "Edit", on: { click: () => edit(agent) } }),
    ),
  );
}

function render({ interlocutors, agents: list }) {
  agents = list;
  fill(byId("interlocutors"), interlocutors.map(interlocutorRow));
  fill(byId("agents"), agents.map(agentRow));
  // A new person is answered by a subagent of their own; without one they are added disabled.
  const subagents = agents.filter((agent) => agent.id !== 1);
  for (const select of document.querySelectorAll("[data-agents]")) {
    fill(
      select,
      subagents.map((agent) => el("option", { value: String(agent.id), text: agentName(agent.id) })),
      el("option", { value: "0", text: "No agent (added disabled)" }),
    );
  }
  byId("new-person-agent-hint").textContent =
    subagents.length === 0
      ? "No subagent yet: the person is added disabled. Create a subagent under Agents below, then choose it for them."
      : "Their messages go to the agent chosen here; with no agent they are added disabled.";
}

async function readConversation(agent) {
  try {
    const { messages } = await api(`/api/people/agents/${agent.id}/messages?limit=100`);
    byId("conversation-title").textContent = `Conversation of ${agent.name} (ID: ${agent.id})`;
    fill(
      byId("conversation"),
      messages.length === 0
        ? el("li", { class: "muted", text: "Nothing yet." })
        : messages.map((message) =>
            el(
              "li",
              {},
              el("span", { class: "muted small", text: `${message.createdAt} ${message.role}` }),
              el("pre", { text: message.text }),
            ),
          ),
    );
  } catch (error) {
    showError(byId("people-error"), error);
  }
}

function edit(agent) {
  const form = byId("agent-form");
  form.elements.id.value = String(agent.id);
  form.elements.name.value = agent.name;
  form.elements.system_prompt.value = agent.system_prompt;
  form.elements.allowed_tools.value = agent.allowed_tools.join(", ");
  form.elements.allowed_plugins.value = agent.allowed_plugins.join(", ");
  byId("agent-form-title").textContent = `Edit ${agent.name} (ID: ${agent.id})`;
  byId("agent-save").textContent = "Save";
  form.elements.name.focus();
}

function clearAgentForm() {
  byId("agent-form").reset();
  byId("agent-form").elements.id.value = "";
  byId("agent-form-title").textContent = "New subagent";
  byId("agent-save").textContent = "Create";
}

const list = (text) =>
  text
    .split(",")
    .map((entry) => entry.trim())
    .filter(Boolean);

byId("agent-new").addEventListener("click", clearAgentForm);

byId("agent-form").addEventListener("submit", (event) => {
  event.preventDefault();
  const form = event.target;
  const id = Number(form.elements.id.value) || undefined;
  const body = {
    action: id ? "update" : "create",
    ...(id ? { id } : {}),
    name: form.elements.name.value.trim(),
    system_prompt: form.elements.system_prompt.value,
    allowed_tools: list(form.elements.allowed_tools.value),
    allowed_plugins: list(form.elements.allowed_plugins.value),
  };
  void busy(byId("agent-save"), async () => {
    if (await change("/api/people/agents", body)) clearAgentForm();
  });
});

byId("interlocutor-form").addEventListener("submit", (event) => {
  event.preventDefault();
  const form = event.target;
  const identifier = form.elements.identifier.value.trim();
  const agentId = Number(form.elements.agent_id.value);
  const body = {
    action: "create",
    display_name: form.elements.display_name.value.trim(),
    ...(identifier ? { service: form.elements.service.value, identifier } : {}),
    ...(agentId ? { agent_id: agentId } : { enabled: false }),
  };
  void change("/api/people/interlocutors", body).then((ok) => ok && form.reset());
});

try {
  render(await api("/api/people"));
} catch (error) {
  showError(byId("people-error"), error);
}

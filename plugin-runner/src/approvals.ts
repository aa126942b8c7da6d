import { readFile } from "node:fs/promises";
import { DomainError, writeFileAtomic } from "@stavrobot/common";
import type { Outbox } from "@stavrobot/common";
import { FORMAT_LABELS } from "./formats/index.js";
import type { Plugin } from "./formats/format.js";

interface Approval {
  /** The version these tools were approved for; a new version waits again. */
  version: string;
  tools: string[];
  /** The version the owner was last told about (so a waiting plugin is announced once). */
  announced?: string;
}

/** Where the owner approves (the app serves both behind the owner's password). */
export const APPROVAL_HELP =
  'The owner approves it on the Plugins page of the settings (/settings/plugins) or with POST /api/settings/plugins/approve {"name": "<plugin>"}.';

/**
 * The owner's approvals of plugins whose format asks for one (Cyclop One): per tool and per
 * version, kept in the runner's state. A tool not approved for the plugin's current version does
 * not run; a new version waits again, whole. The owner is told once per version that a plugin waits.
 */
export class ApprovalStore {
  private values = new Map<string, Approval>();

  constructor(
    private readonly file: string,
    private readonly outbox: Pick<Outbox, "enqueue">,
  ) {}

  async load(): Promise<void> {
    const raw = await readFile(this.file, "utf8").catch(() => undefined);
    if (raw === undefined) return;
    for (const [name, value] of Object.entries(JSON.parse(raw) as Record<string, Approval>)) {
      if (typeof value?.version === "string" && Array.isArray(value.tools)) this.values.set(name, value);
    }
  }

  /** The plugin's tools still waiting for the owner's approval (none for formats without approval). */
  waiting(plugin: Plugin): string[] {
    if (!plugin.needsApproval) return [];
    const approval = this.values.get(plugin.name);
    const approved = new Set(approval && approval.version === plugin.version ? approval.tools : []);
    // Osaurus tools say for themselves: only `ask` waits (`auto` runs, `deny` and unavailable ones never do).
    return plugin.tools
      .filter((tool) => (tool.policy === undefined || tool.policy === "ask") && !tool.unavailable)
      .map((tool) => tool.name)
      .filter((tool) => !approved.has(tool));
  }

  /** Why `tool` cannot run yet, or undefined when it may. */
  refusal(plugin: Plugin, tool: string): string | undefined {
    if (!this.waiting(plugin).includes(tool)) return undefined;
    return (
      `Plugin "${plugin.name}" (${FORMAT_LABELS[plugin.format]}, version ${plugin.version}) needs the owner's approval ` +
      `before tool "${tool}" can run${askedFor(plugin)}. ${APPROVAL_HELP.replace("<plugin>", plugin.name)} ` +
      "Tell the owner; do not retry until they have approved it."
    );
  }

  /** Approves one tool, or every tool waiting; returns the tools approved. */
  async approve(plugin: Plugin, tool?: string): Promise<string[]> {
    if (!plugin.needsApproval) {
      throw new DomainError(
        "invalid",
        `Plugin "${plugin.name}" does not need approval: its format has none.`,
      );
    }
    const waiting = this.waiting(plugin);
    if (tool !== undefined && !plugin.tools.some((candidate) => candidate.name === tool)) {
      throw new DomainError("not-found", `Plugin "${plugin.name}" has no tool "${tool}".`);
    }
    if (tool !== undefined && !waiting.includes(tool) && !this.approvedTools(plugin).includes(tool)) {
      throw new DomainError(
        "invalid",
        `Tool "${tool}" of plugin "${plugin.name}" does not wait for approval: its policy says whether it runs.`,
      );
    }
    const chosen = tool === undefined ? waiting : waiting.filter((name) => name === tool);
    const current = this.values.get(plugin.name);
    const kept = current && current.version === plugin.version ? current.tools : [];
    this.values.set(plugin.name, {
      version: plugin.version ?? "",
      tools: [...new Set([...kept, ...chosen])],
      ...(current?.announced ? { announced: current.announced } : {}),
    });
    await this.save();
    return chosen;
  }

  private approvedTools(plugin: Plugin): string[] {
    const approval = this.values.get(plugin.name);
    return approval && approval.version === plugin.version ? approval.tools : [];
  }

  /** Tells the owner (through the app, on their channel) that the plugin waits, once per version. */
  async announce(plugin: Plugin): Promise<boolean> {
    const waiting = this.waiting(plugin);
    const current = this.values.get(plugin.name);
    if (waiting.length === 0 || current?.announced === plugin.version) return false;
    this.values.set(plugin.name, {
      version: current?.version ?? "",
      tools: current?.tools ?? [],
      announced: plugin.version ?? "",
    });
    await this.save();
    const message =
      `Plugin "${plugin.name}" (${FORMAT_LABELS[plugin.format]}, version ${plugin.version}) waits for the owner's approval ` +
      `before its tools can run (${waiting.join(", ")})${askedFor(plugin)}. ${APPROVAL_HELP.replace("<plugin>", plugin.name)} ` +
      "Tell the owner, with the permissions it asks for.";
    await this.outbox.enqueue({ source: `plugin:${plugin.name}/approval`, message });
    return true;
  }

  async remove(name: string): Promise<void> {
    if (this.values.delete(name)) await this.save();
  }

  private async save(): Promise<void> {
    await writeFileAtomic(this.file, JSON.stringify(Object.fromEntries(this.values), null, 2) + "\n");
  }
}

function askedFor(plugin: Plugin): string {
  return plugin.declared.length > 0
    ? `; it asks for these permissions: ${plugin.declared.join(", ")}`
    : "; it asks for no permissions";
}

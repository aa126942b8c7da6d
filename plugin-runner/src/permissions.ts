import { readFile } from "node:fs/promises";
import { permissionsSchema, writeFileAtomic, type Permissions } from "@stavrobot/common";

export const ALL_TOOLS: Permissions = ["*"];

/**
 * Which tools of each plugin may run: the owner's choice, kept in the runner's own state
 * directory. `config.json` carries a copy (as the reference does), but a plugin can rewrite its
 * config.json, so the copy is never trusted: this file is.
 */
export class PermissionStore {
  private values = new Map<string, Permissions>();

  constructor(private readonly file: string) {}

  async load(): Promise<void> {
    let raw: string;
    try {
      raw = await readFile(this.file, "utf8");
    } catch {
      return;
    }
    const parsed: unknown = JSON.parse(raw);
    if (!parsed || typeof parsed !== "object") return;
    for (const [plugin, value] of Object.entries(parsed)) {
      const permissions = permissionsSchema.safeParse(value);
      if (permissions.success) this.values.set(plugin, permissions.data);
    }
  }

  has(plugin: string): boolean {
    return this.values.has(plugin);
  }

  get(plugin: string): Permissions {
    return this.values.get(plugin) ?? ALL_TOOLS;
  }

  async set(plugin: string, permissions: Permissions): Promise<void> {
    this.values.set(plugin, [...new Set(permissions)]);
    await this.save();
  }

  async remove(plugin: string): Promise<void> {
    if (this.values.delete(plugin)) await this.save();
  }

  private async save(): Promise<void> {
    await writeFileAtomic(this.file, JSON.stringify(Object.fromEntries(this.values), null, 2) + "\n");
  }
}

import { listPluginsResponseSchema, readValidJson, type Router, type ServiceClient } from "@stavrobot/common";
import { z } from "zod";
import { visiblePlugins } from "../plugins/visible.js";
import { fetchSkill, type SkillSourceOptions } from "../skills/sources.js";
import type { SkillRecord, SkillStore } from "../skills/store.js";

export interface SkillSettingsDeps {
  store: SkillStore;
  sources: Omit<SkillSourceOptions, "signal">;
  pluginRunner: ServiceClient;
  /** Told after every change, so the model's list is composed again. */
  changed: () => void;
}

const BODY_LIMIT = 16 * 1024;
const nameSchema = z
  .string()
  .regex(/^[a-z0-9]+(?:-[a-z0-9]+)*$/, "a skill's name")
  .max(64);
const nameRequest = z.strictObject({ name: nameSchema });
const approveRequest = z.strictObject({
  name: nameSchema,
  /** The content the owner looked at: a skill that changed since is not approved. */
  hash: z
    .string()
    .regex(/^[0-9a-f]{64}$/, "a content hash")
    .optional(),
});
const installRequest = z.strictObject({ url: z.string().min(1).max(2000) });

/** The text of a skill the owner views: its SKILL.md and the names of its other files. */
const VIEW_LIMIT_BYTES = 256 * 1024;

/**
 * The owner's skill settings (behind the owner's password; the Skills page uses them): the list,
 * a skill's text, and what only the owner decides: `approve {name, hash?}` (the content installed
 * now becomes the approved one), `disable` / `enable`, `remove`, and `install {url}`. The model's
 * tool has no way to reach these.
 */
export function addSkillSettingsRoutes(router: Router, deps: SkillSettingsDeps): Router {
  const { store } = deps;
  const changing =
    <T extends z.ZodType>(schema: T, act: (body: z.infer<T>) => Promise<unknown>) =>
    async ({ req }: { req: Parameters<typeof readValidJson>[0] }) => {
      const body = await readValidJson(req, BODY_LIMIT, schema);
      const result = await act(body);
      deps.changed();
      return { json: result };
    };
  return router
    .get("/api/settings/skills", async () => ({
      json: { skills: (await store.list()).map(view), fromPlugins: await pluginSkills(deps.pluginRunner) },
    }))
    .get("/api/settings/skills/:name", async ({ params }) => {
      const name = nameSchema.safeParse(params.name);
      const { record, files } = await store.files(name.success ? name.data : "-", false);
      const text = (files.get("SKILL.md") ?? Buffer.alloc(0)).subarray(0, VIEW_LIMIT_BYTES).toString("utf8");
      const others = [...files.entries()]
        .filter(([path]) => path !== "SKILL.md")
        .map(([path, data]) => ({ path, bytes: data.length }))
        .sort((a, b) => a.path.localeCompare(b.path));
      return { json: { skill: view(record), text, files: others } };
    })
    .post(
      "/api/settings/skills/approve",
      changing(approveRequest, async ({ name, hash }) => ({ skill: view(await store.approve(name, hash)) })),
    )
    .post(
      "/api/settings/skills/disable",
      changing(nameRequest, async ({ name }) => ({ skill: view(await store.setEnabled(name, false)) })),
    )
    .post(
      "/api/settings/skills/enable",
      changing(nameRequest, async ({ name }) => ({ skill: view(await store.setEnabled(name, true)) })),
    )
    .post(
      "/api/settings/skills/remove",
      changing(nameRequest, async ({ name }) => {
        await store.remove(name);
        return { removed: name };
      }),
    )
    .post(
      "/api/settings/skills/install",
      changing(installRequest, async ({ url }) => {
        const outcome = await store.install(await fetchSkill(url.trim(), deps.sources), url.trim());
        return { ...outcome, skill: view((await store.get(outcome.name)) as SkillRecord) };
      }),
    );
}

function view(skill: SkillRecord) {
  return {
    name: skill.name,
    description: skill.description,
    format: skill.format,
    source: skill.source,
    version: skill.version,
    author: skill.author,
    hash: skill.contentHash,
    status: skill.status,
    installedAt: skill.installedAt.toISOString(),
    updatedAt: skill.updatedAt.toISOString(),
    approvedVersion: skill.approvedVersion,
    approvedAt: skill.approvedAt?.toISOString() ?? null,
  };
}

/** The skills plugins ship (approved with their plugin), or none when the runner does not answer. */
async function pluginSkills(pluginRunner: ServiceClient) {
  try {
    const { data } = await pluginRunner.request("GET", "/bundles", { retries: 0, timeoutMs: 5_000 });
    const parsed = listPluginsResponseSchema.safeParse(data);
    if (!parsed.success) return [];
    return visiblePlugins(parsed.data.plugins).flatMap((plugin) =>
      (plugin.skills ?? []).map((skill) => ({
        plugin: plugin.name,
        name: skill.name,
        description: skill.description,
      })),
    );
  } catch {
    return [];
  }
}

import type { AgentTool } from "@mariozechner/pi-agent-core";
import { StringEnum, Type } from "@mariozechner/pi-ai";
import type { Queryable } from "../db/database.js";
import * as pages from "../db/pages.js";
import { checkPageQuery } from "../pages/query.js";
import { ToolError, capText, RESULT_LIMIT_BYTES, textResult, unknownAction } from "./result.js";
import { DomainError } from "@stavrobot/common";

const actions = ["upsert", "delete", "read", "list_versions", "restore_version", "help"] as const;

const parameters = Type.Object({
  action: StringEnum(actions),
  path: Type.Optional(Type.String({ description: "Page path, served at /pages/<path>." })),
  mimetype: Type.Optional(Type.String({ description: "e.g. text/html." })),
  content: Type.Optional(Type.String({ description: "The page's content." })),
  is_public: Type.Optional(Type.Boolean({ description: "Reachable without the password. Default false." })),
  queries: Type.Optional(
    Type.Record(Type.String(), Type.String(), { description: "Named read-only SQL queries." }),
  ),
  version: Type.Optional(Type.Integer({ description: "restore_version: the version to restore." })),
});

export function createManagePagesTool(deps: {
  db: Queryable;
  publicHostname: string;
}): AgentTool<typeof parameters> {
  const { db } = deps;
  const help = `manage_pages publishes web pages at ${deps.publicHostname}/pages/<path>. Every change is a new version; nothing is lost.
Actions:
- upsert {path, content, mimetype, is_public?, queries?}: a new page needs content and mimetype; for an existing page, the fields you omit are kept.
- delete {path}: the page is no longer served (a version that can be restored).
- read {path}: the latest version.
- list_versions {path}; restore_version {path, version}: makes an old version the latest again.
- help: this text.
Pages are static and served as stored (GET only, no server-side code). Never make a page public unless the owner explicitly asks. For dynamic data, give the page named queries (one read-only SELECT/WITH statement each, no comments; $param:name placeholders are filled from the query string) and load them from the page with fetch("/api/pages/<path>/queries/<name>?name=value"), which answers a JSON array of rows (at most 1000) and has the page's visibility. Write a placeholder outside quotes, as a value of its own: '%' || $param:q || '%', not '%$param:q%'. Numbers (integer, bigint, numeric, real, double precision) come back as JSON numbers when a JSON number holds them exactly (numeric 12.50 comes back as 12.5: format with toFixed); a value it cannot hold exactly (a bigint above 2^53, a numeric with more digits than a double keeps, NaN, Infinity) comes back as a string of its exact digits, so check with typeof before adding up. An HTML page runs in a sandboxed frame: its scripts (inline, one file) may read its own queries and nothing else: no other address of this site, no other site, no forms, pop-ups or links that leave it. For charts, load Chart.js with <script src="/pages-lib/chart.js"></script>. Keep pages simple and readable on a phone, in light and dark mode.`;
  const pathOf = (value: string | undefined): string => {
    const path = pages.normalizePagePath(value ?? "");
    if (!path)
      throw new ToolError("'path' must be letters, digits, '-', '_' or '.' segments separated by '/'.");
    return path;
  };
  return {
    name: "manage_pages",
    label: "Manage pages",
    description:
      "Create, update, delete, read or restore web pages you publish (with optional read-only data queries). Use action 'help' for details.",
    parameters,
    async execute(_id, params) {
      switch (params.action) {
        case "help":
          return textResult(help);
        case "upsert": {
          const path = pathOf(params.path);
          for (const [name, sql] of Object.entries(params.queries ?? {})) {
            if (!/^[A-Za-z0-9_-]+$/.test(name))
              throw new ToolError(`Query name "${name}": use letters, digits, - and _.`);
            try {
              checkPageQuery(sql);
            } catch (error) {
              if (error instanceof DomainError) throw new ToolError(`Query "${name}": ${error.message}`);
              throw error;
            }
          }
          const current = await pages.latestPage(db, path);
          const live = current && current.data.length > 0 ? current : undefined;
          if (!live && (params.content === undefined || !params.mimetype)) {
            throw new ToolError("A new page needs 'content' and 'mimetype'.");
          }
          if (
            live &&
            params.content === undefined &&
            params.mimetype === undefined &&
            params.is_public === undefined &&
            params.queries === undefined
          ) {
            throw new ToolError("Nothing to change: give content, mimetype, is_public or queries.");
          }
          await pages.addVersion(db, {
            path,
            mimetype: params.mimetype ?? live?.mimetype ?? "text/html",
            data:
              params.content !== undefined
                ? Buffer.from(params.content, "utf8")
                : (live?.data ?? Buffer.alloc(0)),
            isPublic: params.is_public ?? live?.isPublic ?? false,
            queries: params.queries ?? live?.queries ?? null,
          });
          return textResult(`${live ? "Page updated" : "Page created"} at /pages/${path}`);
        }
        case "delete": {
          const path = pathOf(params.path);
          const current = await pages.latestPage(db, path);
          if (!current || current.data.length === 0) return textResult(`Page not found: ${path}`);
          await pages.addVersion(db, { ...current, data: Buffer.alloc(0) });
          return textResult(`Page deleted: ${path}`);
        }
        case "read": {
          const path = pathOf(params.path);
          const current = await pages.latestPage(db, path);
          if (!current) throw new ToolError(`Page not found: ${path}`);
          const shown = {
            path,
            version: current.version,
            mimetype: current.mimetype,
            data: current.data.toString("utf8"),
            is_public: current.isPublic,
            queries: current.queries,
            created_at: current.createdAt.toISOString(),
          };
          return textResult(capText(JSON.stringify(shown, null, 2), RESULT_LIMIT_BYTES, "The page is long."));
        }
        case "list_versions": {
          const path = pathOf(params.path);
          const versions = await pages.listVersions(db, path);
          if (versions.length === 0) throw new ToolError(`Page not found: ${path}`);
          return textResult(JSON.stringify(versions));
        }
        case "restore_version": {
          const path = pathOf(params.path);
          if (params.version === undefined) throw new ToolError("restore_version needs 'version'.");
          const old = await pages.pageVersion(db, path, params.version);
          if (!old) throw new ToolError(`Version ${params.version} of ${path} not found.`);
          const version = await pages.addVersion(db, old);
          return textResult(`Version ${params.version} of /pages/${path} restored as version ${version}.`);
        }
        default:
          throw unknownAction(String((params as { action: unknown }).action), actions);
      }
    },
  };
}

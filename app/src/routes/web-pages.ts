import { join } from "node:path";
import type { Router } from "@stavrobot/common";
import { createAssetHandler } from "../web/assets.js";
import { UI_PAGES, WEB_DIR, createUiPageHandler } from "../web/pages.js";

/**
 * The admin UI (behind the owner's password like everything else): its pages, `GET /plugins` (the
 * reference's old address of the plugin page) and `GET /assets/...`.
 */
export function addWebRoutes(router: Router, webDir = WEB_DIR): Router {
  for (const page of UI_PAGES) router.get(page.path, createUiPageHandler(page, webDir));
  return router
    .get("/plugins", () => ({ status: 302, headers: { Location: "/settings/plugins" } }))
    .get("/assets/*", createAssetHandler(join(webDir, "assets")));
}

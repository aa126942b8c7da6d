import { join } from "node:path";
import type { Router } from "@stavrobot/common";
import { createAssetHandler, createStaticHandler } from "../web/assets.js";
import { PAGE_LIBRARY_PATH } from "../pages/frame.js";
import { UI_PAGES, WEB_DIR, createUiPageHandler } from "../web/pages.js";

/**
 * The admin UI (behind the owner's password like everything else): its pages, `GET /plugins` (the
 * reference's old address of the plugin page) and `GET /assets/...`; and, open to anyone, what the
 * model's pages load from this site (`GET /pages-lib/...`: the frame's style sheet, Chart.js).
 */
export function addWebRoutes(router: Router, webDir = WEB_DIR): Router {
  for (const page of UI_PAGES) router.get(page.path, createUiPageHandler(page, webDir));
  return router
    .get("/plugins", () => ({ status: 302, headers: { Location: "/settings/plugins" } }))
    .get("/assets/*", createAssetHandler(join(webDir, "assets")))
    .get(
      `${PAGE_LIBRARY_PATH}*`,
      createStaticHandler(join(webDir, "pages-lib"), {
        vendor: { "chart.js": { beside: "chart.js", file: "chart.umd.min.js" } },
        headers: { "Cache-Control": "public, max-age=3600" },
      }),
      { public: true },
    );
}

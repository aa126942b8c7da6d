import { createHash } from "node:crypto";
import { readFile, readdir } from "node:fs/promises";
import { createRequire } from "node:module";
import { dirname, extname, join, relative, sep } from "node:path";
import { notFound, type Handler } from "@stavrobot/common";
import { UI_HEADERS } from "./security.js";

const CONTENT_TYPES: Readonly<Record<string, string>> = {
  ".css": "text/css; charset=utf-8",
  ".js": "text/javascript; charset=utf-8",
  ".svg": "image/svg+xml",
  ".png": "image/png",
  ".ico": "image/x-icon",
  ".webmanifest": "application/manifest+json",
};

interface Asset {
  body: Buffer;
  type: string;
  etag: string;
}

/**
 * Files of npm packages served beside a directory's own: served path → the module to resolve, or
 * a file beside a module's entry (for a package that exports only its entry).
 */
export type VendorFiles = Readonly<Record<string, string | { beside: string; file: string }>>;

/**
 * The UI's static files, `GET /assets/<path>`: everything under `app/web/assets` with a known
 * type, plus marked's browser build from node_modules (`/assets/vendor/marked.esm.js`), so no
 * page needs a CDN. The set of files is read once, when first asked for; a request is answered
 * only with a file of that set, looked up by its exact path, so `..`, encoded slashes or links can
 * never reach anything else. Assets are revalidated on every use (`no-cache` with an ETag): there
 * is no build step to put a version in their names, and an upgraded app must not run stale scripts.
 */
export function createAssetHandler(assetsDir: string): Handler {
  return createStaticHandler(assetsDir, {
    vendor: { "vendor/marked.esm.js": "marked" },
    headers: { ...UI_HEADERS, "Cache-Control": "private, no-cache" },
  });
}

/**
 * A directory's files (and `vendor` files of npm packages) by their exact paths, with `headers`
 * and an ETag each (see `createAssetHandler`).
 */
export function createStaticHandler(
  dir: string,
  options: { vendor: VendorFiles; headers: Readonly<Record<string, string>> },
): Handler {
  let loading: Promise<Map<string, Asset>> | undefined;
  return async ({ req, params }) => {
    loading ??= loadAssets(dir, options.vendor);
    const asset = (await loading).get(params["*"] ?? "");
    if (!asset) throw notFound();
    const headers = { ...options.headers, "Content-Type": asset.type, ETag: asset.etag };
    if (req.headers["if-none-match"] === asset.etag) return { status: 304, headers };
    return { body: asset.body, headers };
  };
}

async function loadAssets(dir: string, vendor: VendorFiles): Promise<Map<string, Asset>> {
  const assets = new Map<string, Asset>();
  const entries = await readdir(dir, { recursive: true, withFileTypes: true });
  for (const entry of entries) {
    if (!entry.isFile()) continue;
    const type = CONTENT_TYPES[extname(entry.name)];
    if (!type) continue;
    const path = join(entry.parentPath, entry.name);
    assets.set(relative(dir, path).split(sep).join("/"), asset(await readFile(path), type));
  }
  const require = createRequire(import.meta.url);
  for (const [served, file] of Object.entries(vendor)) {
    const type = CONTENT_TYPES[extname(served)] as string;
    const path =
      typeof file === "string"
        ? require.resolve(file)
        : join(dirname(require.resolve(file.beside)), file.file);
    assets.set(served, asset(await readFile(path), type));
  }
  return assets;
}

function asset(body: Buffer, type: string): Asset {
  return { body, type, etag: `"${createHash("sha256").update(body).digest("base64url").slice(0, 27)}"` };
}

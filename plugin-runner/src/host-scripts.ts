import { fileURLToPath } from "node:url";

/**
 * The scripts the runner starts inside plugin sandboxes (the Workbench host), found beside the
 * runner's code: one directory up from this module in `src/`, `dist/` and `bundle/` alike, which
 * is why this module sits at the top of `src/`.
 */
export const HOST_SCRIPTS_DIR = fileURLToPath(new URL("../hosts/", import.meta.url));

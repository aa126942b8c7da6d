/**
 * `npm install`'s step that keeps the prepared embedded database (scripts/prepare.mjs), so that
 * the first start copies it instead of waiting for PostgreSQL's initdb: the same prepared database
 * a start would make (db/pglite-create.ts), in PGLITE_TEMPLATE_DIR or node_modules' cache.
 * Exit 0 when it is there (made now or before).
 */
import { errorMessage } from "@stavrobot/common";
import { defaultTemplateDir, preparedDatabase } from "../db/pglite-create.js";

const started = performance.now();
try {
  const dir = await preparedDatabase(process.env.PGLITE_TEMPLATE_DIR || defaultTemplateDir());
  process.stderr.write(
    `Prepared embedded database: ${dir} (${Math.round(performance.now() - started)} ms)\n`,
  );
  process.exit(0);
} catch (error) {
  process.stderr.write(`${errorMessage(error)}\n`);
  process.exit(1);
}

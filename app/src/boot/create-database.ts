/**
 * A short-lived process that creates the embedded database in an empty directory: PostgreSQL's
 * initdb, then the migrations. The app starts it (db/pglite-create.ts) so that the hundreds of MB
 * initdb takes in PGlite's WebAssembly memory are this process's, returned when it exits.
 * Usage: create-database <empty directory>. Exit 0 when the database is complete and closed.
 */
import { errorMessage } from "@stavrobot/common";
import { migrate } from "../db/migrations.js";
import { openPgliteHere } from "../db/pglite.js";

const dir = process.argv[2];
if (!dir) {
  process.stderr.write("usage: create-database <empty directory>\n");
  process.exit(2);
}
try {
  const db = await openPgliteHere(dir);
  await migrate(db);
  await db.close();
  process.exit(0);
} catch (error) {
  process.stderr.write(`${errorMessage(error)}\n`);
  process.exit(1);
}

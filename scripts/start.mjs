// `npm start`: runs the assistant from bundled JavaScript (no TypeScript loader at run time, and
// one file per service to load instead of ~1,000 modules: a faster start and a smaller process).
// The services are bundled first when a source changed since the last bundle (or none exists);
// that takes a second or two (`npm install` bundles them already: prepare.mjs). Then the launcher
// (app/src/boot/start-local.ts, as app/bundle/start-local.js) runs in this process and starts the
// sibling services from their bundles.
import { pathToFileURL } from "node:url";
import { bundleIfStale, launcher } from "./prepare.mjs";

await bundleIfStale();
await import(pathToFileURL(launcher).href);

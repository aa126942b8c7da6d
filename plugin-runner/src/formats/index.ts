import type { FormatId, LoadRequest, Loaded, PluginFormat } from "./format.js";

export type { FormatId, JsonSchema, LoadRequest, Loaded, PluginFormat } from "./format.js";
export { FORMAT_IDS, FORMAT_LABELS, derivePluginName, flatParameters } from "./format.js";

/** The formats this runner hosts; a directory is each one's if its marker files are there, tried in order. */
export class Formats {
  private readonly byId = new Map<FormatId, PluginFormat>();

  constructor(readonly all: readonly PluginFormat[]) {
    for (const format of all) this.byId.set(format.id, format);
  }

  get(id: FormatId): PluginFormat {
    const format = this.byId.get(id);
    if (!format) throw new Error(`unknown plugin format "${id}"`);
    return format;
  }

  /** The format of the plugin in `dir`, or undefined when no format recognises it. */
  async detect(dir: string): Promise<PluginFormat | undefined> {
    for (const format of this.all) if (await format.recognise(dir)) return format;
    return undefined;
  }

  /** Detects and loads; throws naming what each format looks for when none recognises the directory. */
  async load(request: LoadRequest): Promise<Loaded> {
    const format = await this.detect(request.dir);
    if (!format) throw new Error(NO_FORMAT);
    return format.load(request);
  }

  async stop(plugin: string): Promise<void> {
    await Promise.all(this.all.map((format) => format.stop(plugin)));
  }

  async stopAll(): Promise<void> {
    await Promise.all(this.all.map((format) => format.stopAll()));
  }
}

export const NO_FORMAT =
  "no plugin found: expected manifest.json (Stavrobot), plugin.json (Cyclop One) or package.json with index.js (Workbench)";

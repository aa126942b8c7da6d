import { readFile } from "node:fs/promises";
import { DomainError, writeFileAtomic } from "@stavrobot/common";
import { checkGitUrl } from "./git.js";

/** Where a plugin installed from a folder of a larger repository came from (`<url>#path=<dir>`). */
export interface Source {
  url: string;
  path: string;
}

/** `https://…/repo.git#path=plugins/echo` → the repository and the folder (none without a fragment). */
export function parseInstallUrl(input: string): { url: string; path?: string } {
  const hash = input.indexOf("#");
  if (hash === -1) {
    checkGitUrl(input);
    return { url: input };
  }
  const url = input.slice(0, hash);
  checkGitUrl(url);
  const fragment = input.slice(hash + 1);
  const path = fragment.startsWith("path=")
    ? decodeURIComponent(fragment.slice(5)).replace(/\/+$/, "")
    : undefined;
  const parts = path?.split("/") ?? [];
  const valid =
    path !== undefined &&
    path.length > 0 &&
    path.length <= 512 &&
    parts.every(
      (part) => part.length > 0 && part !== "." && part !== ".." && /^[A-Za-z0-9._ @+-]+$/.test(part),
    );
  if (!valid) {
    throw new DomainError(
      "invalid",
      'The URL fragment must be "#path=<folder>": a relative folder of the repository, without "..".',
    );
  }
  return { url, path };
}

/** The repository's name from its URL (`…/weather-tools.git` → `weather-tools`), for naming. */
export function repositoryName(url: string): string {
  const last =
    url
      .replace(/[/#?]+$/, "")
      .split(/[/:]/)
      .pop() ?? "";
  return last.replace(/\.git$/, "");
}

/**
 * The folder installs, kept in the runner's state: such a plugin has no `.git` of its own, so an
 * update clones its repository again and replaces the folder, and it is not "editable".
 */
export class SourceStore {
  private values = new Map<string, Source>();

  constructor(private readonly file: string) {}

  async load(): Promise<void> {
    const raw = await readFile(this.file, "utf8").catch(() => undefined);
    if (raw === undefined) return;
    const parsed = JSON.parse(raw) as Record<string, Source>;
    for (const [name, source] of Object.entries(parsed)) {
      if (typeof source?.url === "string" && typeof source.path === "string") this.values.set(name, source);
    }
  }

  get(name: string): Source | undefined {
    return this.values.get(name);
  }

  async set(name: string, source: Source | undefined): Promise<void> {
    if (source) this.values.set(name, source);
    else if (!this.values.delete(name)) return;
    await writeFileAtomic(this.file, JSON.stringify(Object.fromEntries(this.values), null, 2) + "\n");
  }
}

import { execFile } from "node:child_process";
import { lookup as dnsLookup } from "node:dns/promises";
import { lstat, mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, posix } from "node:path";
import { DomainError } from "@stavrobot/common";
import { fetchPage } from "../net/fetch-page.js";
import { FetchRefusedError, resolvePublicAddress, type LookupAll } from "../net/public-address.js";
import { SKILL_LIMITS, checkLimits, cleanSkillPath, readSkillDir, type SkillFiles } from "./files.js";
import { SKILL_TEXT_MAX_BYTES, parseSkill } from "./parse.js";
import type { SkillPackage } from "./store.js";

export interface SkillSourceOptions {
  /**
   * Addresses that are not public (loopback, a private network) and local git repositories
   * (`file://`, a path): off by default, as for web_fetch, since the model asks for installs.
   */
  allowPrivateSources: boolean;
  lookup?: LookupAll;
  /** Test seam, see FetchPageOptions.connectTo. */
  connectTo?: (address: string) => string;
  timeoutMs?: number;
  signal?: AbortSignal;
}

/** How a source is fetched, said by its form. */
export type SourceKind = "page" | "zip" | "git";

/**
 * What an install URL names: a git repository (`git@`, `ssh://`, `git://`, `file://`, a URL ending
 * in `.git`, or any with `#path=`), a zip (a path ending in `.zip`), or else a Markdown file (a
 * `SKILL.md` or a skill page). `#path=<folder or file>` picks the skill inside a repository or zip.
 */
export function sourceKind(url: string): { kind: SourceKind; base: string; path: string | undefined } {
  const [base = "", fragment] = url.split("#", 2);
  const path = fragment?.startsWith("path=") ? decodeURIComponent(fragment.slice(5)) : undefined;
  if (fragment !== undefined && path === undefined)
    throw new DomainError(
      "invalid",
      "The only fragment an install URL takes is #path=<folder in the repository>.",
    );
  const bare = base.replace(/[?].*$/, "");
  if (/^(git@|ssh:\/\/|git:\/\/|file:\/\/|\/)/.test(base) || bare.endsWith(".git"))
    return { kind: "git", base, path };
  if (!/^https?:\/\//i.test(base))
    throw new DomainError(
      "invalid",
      "Install a skill from an https:// URL (a SKILL.md, a skill page or a .zip) or a git URL.",
    );
  if (/\.zip$/i.test(bare)) return { kind: "zip", base, path };
  if (path !== undefined) return { kind: "git", base, path };
  return { kind: "page", base, path };
}

/** Fetches a skill from `url` and reads it; the error says what is wrong with it. */
export async function fetchSkill(url: string, options: SkillSourceOptions): Promise<SkillPackage> {
  const { kind, base, path } = sourceKind(url.trim());
  try {
    if (kind === "page") {
      const page = await download(base, SKILL_TEXT_MAX_BYTES, options);
      if (page.mediaType === "text/html")
        throw new DomainError(
          "invalid",
          `${base} answered an HTML page, not Markdown: give the raw .md file's address, or the repository's git URL with #path=<folder>.`,
        );
      const fileName = posix.basename(new URL(page.url).pathname) || "SKILL.md";
      return {
        parsed: parseOrSay(page.body.toString("utf8"), fileName, base),
        files: new Map([["SKILL.md", page.body]]),
      };
    }
    if (kind === "zip") {
      const zip = await download(base, SKILL_LIMITS.totalBytes, options);
      return fromFiles(await unzip(zip.body), path, base);
    }
    return fromFiles(await cloneGit(base, path, options), path, base);
  } catch (error) {
    if (error instanceof FetchRefusedError) throw new DomainError("invalid", error.message);
    throw error;
  }
}

/**
 * A skill from a file the owner uploaded: a `.zip` (`#path`-less: the shallowest SKILL.md) or a
 * Markdown file (a SKILL.md or a skill page, named by `fileName`).
 */
export async function skillFromUpload(fileName: string, data: Buffer): Promise<SkillPackage> {
  if (/\.zip$/i.test(fileName)) return fromFiles(await unzip(data), undefined, fileName);
  if (!/\.(md|markdown)$/i.test(fileName))
    throw new DomainError("invalid", `${fileName} is neither a .zip nor a Markdown (.md) file.`);
  if (data.length > SKILL_TEXT_MAX_BYTES)
    throw new DomainError("too-large", "The skill is larger than 256 KB.");
  return {
    parsed: parseOrSay(data.toString("utf8"), fileName, fileName),
    files: new Map([["SKILL.md", data]]),
  };
}

function download(url: string, maxBytes: number, options: SkillSourceOptions) {
  return fetchPage(url, {
    lookup: options.lookup ?? dnsLookup,
    allowPrivateNetworks: options.allowPrivateSources,
    maxBytes,
    timeoutMs: options.timeoutMs ?? 30_000,
    maxRedirects: 5,
    ...(options.signal ? { signal: options.signal } : {}),
    ...(options.connectTo ? { connectTo: options.connectTo } : {}),
  });
}

async function unzip(data: Buffer): Promise<SkillFiles> {
  const { unzipSync } = await import("fflate");
  let count = 0;
  let total = 0;
  let entries: Record<string, Uint8Array>;
  try {
    entries = unzipSync(new Uint8Array(data), {
      filter: (file) => {
        if (file.name.endsWith("/")) return false;
        count++;
        total += file.originalSize;
        if (
          count > SKILL_LIMITS.files * 5 ||
          total > SKILL_LIMITS.totalBytes * 4 ||
          file.originalSize > SKILL_LIMITS.fileBytes
        )
          throw new DomainError(
            "too-large",
            "The zip holds more than a skill may (200 files, 1 MB each, 5 MB in all).",
          );
        return true;
      },
    });
  } catch (error) {
    if (error instanceof DomainError) throw error;
    throw new DomainError("invalid", `The file is not a readable zip (${(error as Error).message}).`);
  }
  const files: SkillFiles = new Map();
  for (const [name, bytes] of Object.entries(entries)) {
    const clean = cleanSkillPath(name);
    if (clean) files.set(clean, Buffer.from(bytes));
  }
  return files;
}

async function cloneGit(
  url: string,
  path: string | undefined,
  options: SkillSourceOptions,
): Promise<SkillFiles> {
  const local = /^(file:\/\/|\/)/.test(url);
  if (local && !options.allowPrivateSources)
    throw new DomainError(
      "invalid",
      "Skills are not installed from local repositories here ([skills] allowPrivateSources).",
    );
  if (!local) await checkGitHost(url, options);
  const dir = await mkdtemp(join(tmpdir(), "stavrobot-skill-"));
  try {
    await new Promise<void>((resolve, reject) => {
      execFile(
        "git",
        [
          // Only the transports named here (no `ext::`), no redirect to an address not checked,
          // links checked out as plain files.
          "-c",
          "protocol.allow=never",
          ...["https", "http", "ssh", "git"].flatMap((name) => ["-c", `protocol.${name}.allow=always`]),
          "-c",
          `protocol.file.allow=${local ? "always" : "never"}`,
          "-c",
          "http.followRedirects=false",
          "-c",
          "core.symlinks=false",
          "clone",
          "--depth",
          "1",
          "--quiet",
          "--no-tags",
          "--",
          url,
          join(dir, "repo"),
        ],
        {
          timeout: options.timeoutMs ?? 60_000,
          env: {
            PATH: process.env.PATH ?? "/usr/bin:/bin",
            HOME: dir,
            GIT_TERMINAL_PROMPT: "0",
            GIT_SSH_COMMAND: "ssh -o BatchMode=yes",
          },
          ...(options.signal ? { signal: options.signal } : {}),
        },
        (error, _stdout, stderr) => {
          if (!error) return resolve();
          const said = String(stderr).trim().split("\n").slice(-1)[0] ?? "";
          reject(
            new DomainError("invalid", `Could not clone ${url}${said ? `: ${said.slice(0, 300)}` : "."}`),
          );
        },
      );
    });
    return await readCloned(join(dir, "repo"), path);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/**
 * What of a cloned repository is read, with a skill's limits (a large repository is refused):
 * a skill page named by `path` alone; else the folder named (a SKILL.md's), else everything.
 */
async function readCloned(repo: string, path: string | undefined): Promise<SkillFiles> {
  const wanted = path === undefined ? undefined : cleanSkillPath(path.replace(/\/+$/, ""));
  if (
    wanted !== undefined &&
    /\.(md|markdown)$/i.test(wanted) &&
    posix.basename(wanted).toLowerCase() !== "skill.md"
  ) {
    const info = await lstat(join(repo, wanted)).catch(() => undefined);
    if (!info?.isFile()) return new Map();
    if (info.size > SKILL_TEXT_MAX_BYTES)
      throw new DomainError("too-large", "The skill is larger than 256 KB.");
    return new Map([[wanted, await readFile(join(repo, wanted))]]);
  }
  const parent = wanted !== undefined && /\.(md|markdown)$/i.test(wanted) ? posix.dirname(wanted) : wanted;
  const folder = parent === "." ? undefined : parent;
  const found = await readSkillDir(folder === undefined ? repo : join(repo, folder)).catch(
    (error: NodeJS.ErrnoException) => {
      if (error.code === "ENOENT" || error.code === "ENOTDIR") return new Map() as SkillFiles;
      throw error;
    },
  );
  const files: SkillFiles = new Map();
  for (const [name, data] of found) {
    const clean = cleanSkillPath(folder === undefined ? name : `${folder}/${name}`);
    if (clean) files.set(clean, data);
  }
  return files;
}

/** A git URL's host, checked as web_fetch checks an address (git then resolves it again). */
async function checkGitHost(url: string, options: SkillSourceOptions): Promise<void> {
  const host = /^git@([^:/]+):/.exec(url)?.[1] ?? safeHost(url);
  if (!host) throw new DomainError("invalid", `${url} is not a git URL.`);
  await resolvePublicAddress(host, {
    lookup: options.lookup ?? dnsLookup,
    allowPrivateNetworks: options.allowPrivateSources,
  });
}

function safeHost(url: string): string | undefined {
  try {
    return new URL(url).hostname || undefined;
  } catch {
    return undefined;
  }
}

/**
 * The skill among a repository's or zip's files: at `path` (a folder with a SKILL.md, or a
 * Markdown file), else the shallowest SKILL.md, else the only Markdown file at the top. The
 * skill's folder is its main file's; everything in it comes along, the main file as `SKILL.md`.
 */
function fromFiles(all: SkillFiles, path: string | undefined, source: string): SkillPackage {
  const wanted = path === undefined ? undefined : cleanSkillPath(path.replace(/\/+$/, ""));
  if (path !== undefined && wanted === undefined)
    throw new DomainError("invalid", `#path=${path} is not a path inside the repository.`);
  const main = findMain([...all.keys()], wanted);
  if (!main) {
    throw new DomainError(
      "invalid",
      wanted === undefined
        ? `${source} has no SKILL.md (nor a single Markdown skill page at its top).`
        : `${source} has no SKILL.md in ${wanted} (nor a Markdown file there).`,
    );
  }
  const folder = posix.dirname(main);
  const prefix = folder === "." ? "" : `${folder}/`;
  const isSkillMd = posix.basename(main).toLowerCase() === "skill.md";
  const files: SkillFiles = new Map();
  if (isSkillMd) {
    for (const [name, data] of all) {
      if (!name.startsWith(prefix)) continue;
      const relative = name.slice(prefix.length);
      files.set(relative === posix.basename(main) ? "SKILL.md" : relative, data);
    }
  } else {
    files.set("SKILL.md", all.get(main) as Buffer);
  }
  checkLimits(files);
  return {
    parsed: parseOrSay((files.get("SKILL.md") as Buffer).toString("utf8"), posix.basename(main), main),
    files,
  };
}

/** The skill's text parsed; an error says which file and which field. */
function parseOrSay(text: string, fileName: string, where: string) {
  try {
    return parseSkill(text, fileName);
  } catch (error) {
    throw new DomainError("invalid", `${where}: ${(error as Error).message}`);
  }
}

function findMain(names: string[], wanted: string | undefined): string | undefined {
  if (wanted !== undefined && /\.(md|markdown)$/i.test(wanted))
    return names.includes(wanted) ? wanted : undefined;
  const inside = wanted === undefined ? names : names.filter((name) => name.startsWith(`${wanted}/`));
  const depth = (name: string) => name.split("/").length;
  const skillMd = inside
    .filter((name) => posix.basename(name).toLowerCase() === "skill.md")
    .sort((a, b) => depth(a) - depth(b));
  if (skillMd[0]) return skillMd[0];
  const topDepth = wanted === undefined ? 1 : depth(wanted) + 1;
  const top = inside.filter((name) => /\.(md|markdown)$/i.test(name) && depth(name) === topDepth);
  const pages = top.filter((name) => !/^(readme|changelog|license)\.md$/i.test(posix.basename(name)));
  return pages.length === 1 ? pages[0] : undefined;
}

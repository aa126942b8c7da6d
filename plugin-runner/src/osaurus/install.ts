import { mkdtemp, rename, rm } from "node:fs/promises";
import { join } from "node:path";
import { DomainError, PLUGIN_NAME_PATTERN, errorMessage, pathExists } from "@stavrobot/common";
import type { InstallResponse } from "@stavrobot/common";
import type { PackageInstaller, PackageInstallSteps, PackageSource } from "../formats/format.js";
import type { Formats } from "../formats/index.js";
import { OsaurusNameError } from "../formats/osaurus.js";
import { osaurusName } from "../formats/osaurus-manifest.js";
import type { MinisignKey } from "./minisign.js";
import { verifyMinisign } from "./minisign.js";
import { ZIP_MAX_BYTES, parseZipName, unpackZip, writePackage } from "./package.js";
import type { Unpacked, ZipName } from "./package.js";

/** Whether an install URL names an Osaurus package (an http(s) URL whose path ends in `.zip`). */
export function isPackageUrl(url: string): boolean {
  try {
    const parsed = new URL(url);
    return (parsed.protocol === "https:" || parsed.protocol === "http:") && /\.zip$/i.test(parsed.pathname);
  } catch {
    return false;
  }
}

/**
 * Downloads a package and, when trusted keys are configured, its `<url>.minisig` (absent: none).
 * The file name is the URL path's last segment.
 */
export async function downloadPackage(
  url: string,
  options: { timeoutMs: number; wantSignature: boolean },
): Promise<PackageSource> {
  const parsed = new URL(url);
  const fileName = decodeURIComponent(parsed.pathname.split("/").pop() ?? "");
  parseZipName(fileName);
  const bytes = await download(url, options.timeoutMs, ZIP_MAX_BYTES, true);
  if (!bytes) throw new DomainError("invalid", `The package could not be downloaded from ${url}: not found.`);
  let signature: string | undefined;
  if (options.wantSignature) {
    const sig = await download(
      `${parsed.origin}${parsed.pathname}.minisig${parsed.search}`,
      options.timeoutMs,
      64 * 1024,
      false,
    );
    if (sig) signature = sig.toString("utf8");
  }
  return { fileName, bytes, ...(signature !== undefined ? { signature } : {}) };
}

async function download(
  url: string,
  timeoutMs: number,
  limit: number,
  required: boolean,
): Promise<Buffer | undefined> {
  let response: Response;
  try {
    response = await fetch(url, { signal: AbortSignal.timeout(timeoutMs), redirect: "follow" });
  } catch (error) {
    if (!required) return undefined;
    throw new DomainError(
      "invalid",
      `The package could not be downloaded from ${url}: ${errorMessage(error)}`,
    );
  }
  if (response.status === 404 || response.status === 410) {
    await response.body?.cancel();
    return undefined;
  }
  if (!response.ok) {
    await response.body?.cancel();
    if (!required) return undefined;
    throw new DomainError(
      "invalid",
      `The package could not be downloaded from ${url}: HTTP ${response.status}.`,
    );
  }
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of response.body ?? []) {
    size += (chunk as Uint8Array).length;
    if (size > limit) {
      throw new DomainError(
        "too-large",
        `The download from ${url} is larger than ${Math.round(limit / 1024 / 1024)} MB.`,
      );
    }
    chunks.push(Buffer.from(chunk as Uint8Array));
  }
  return Buffer.concat(chunks);
}

export interface OsaurusInstallDeps extends PackageInstallSteps {
  pluginsDir: string;
  formats: Formats;
  trustedKeys: readonly MinisignKey[];
}

/**
 * Osaurus packages as the lifecycle installs them: a signature is fetched beside a downloaded
 * package only when the owner trusts a key to check it with.
 */
export function osaurusPackages(options: {
  pluginsDir: string;
  formats: Formats;
  trustedKeys: readonly MinisignKey[];
}): PackageInstaller {
  return {
    isPackageUrl,
    download: (url, timeoutMs) =>
      downloadPackage(url, { timeoutMs, wantSignature: options.trustedKeys.length > 0 }),
    install: (source, steps) => installOsaurusPackage(source, { ...options, ...steps }),
  };
}

/**
 * Installs a package: its name checked, its signature verified when a trusted key is configured
 * (a bad one refuses it), its library checked (an ELF shared object for this machine), its files
 * placed as the plugin named after `plugin_id`. The library's manifest names the plugin in the
 * end, as in the real host: when its `plugin_id` differs from the file name's, the plugin is
 * placed again under the manifest's name.
 */
export async function installOsaurusPackage(
  source: PackageSource,
  deps: OsaurusInstallDeps,
): Promise<InstallResponse> {
  const zipName = parseZipName(source.fileName);
  const verified = verification(source, deps.trustedKeys);
  const unpacked = await unpackZip(source.bytes);
  const name = pluginNameOf(zipName.pluginId);
  await place(name, zipName, unpacked, verified.ok, deps);
  let final = name;
  try {
    await deps.formats.load({ dir: join(deps.pluginsDir, name), expectedName: name });
  } catch (error) {
    if (!(error instanceof OsaurusNameError)) {
      await deps.purge(name);
      throw new DomainError("failed", `The plugin could not be loaded: ${errorMessage(error)}`);
    }
    await deps.purge(name);
    final = error.manifestName;
    await place(final, zipName, unpacked, verified.ok, deps);
  }
  let response: InstallResponse;
  try {
    response = await deps.setUp(final);
  } catch (error) {
    await deps.purge(final);
    throw error;
  }
  const notes = [verified.note];
  if (final !== name)
    notes.push(`Its manifest's plugin_id names it "${final}" (the file name said "${name}").`);
  if (unpacked.skills.length > 0)
    notes.push(
      `It ships ${unpacked.skills.length} skill(s): ${unpacked.skills.map((skill) => skill.name).join(", ")}.`,
    );
  return {
    ...response,
    message: [response.message, ...notes].join(" "),
    ...(unpacked.warnings.length > 0
      ? { warnings: [...(response.warnings ?? []), ...unpacked.warnings] }
      : {}),
  };
}

function pluginNameOf(pluginId: string): string {
  const name = osaurusName(pluginId);
  if (!name || !PLUGIN_NAME_PATTERN.test(name)) {
    throw new DomainError(
      "invalid",
      `The package's plugin_id "${pluginId.slice(0, 100)}" gives no plugin name.`,
    );
  }
  return name;
}

async function place(
  name: string,
  zipName: ZipName,
  unpacked: Unpacked,
  verified: boolean,
  deps: OsaurusInstallDeps,
): Promise<void> {
  await deps.refuseMcpServer(name);
  const dir = join(deps.pluginsDir, name);
  if (await pathExists(dir)) throw new DomainError("conflict", `Plugin "${name}" is already installed.`);
  const temp = await mkdtemp(join(deps.pluginsDir, ".tmp-install-"));
  try {
    await writePackage(temp, unpacked, {
      plugin_id: zipName.pluginId,
      version: zipName.version,
      library: unpacked.library,
      verified,
      skills: unpacked.skills,
    });
    await rename(temp, dir);
  } catch (error) {
    await rm(temp, { recursive: true, force: true });
    throw error;
  }
}

/** Whether the package is verified, and what the install reply says about it; a bad signature refuses it. */
function verification(source: PackageSource, keys: readonly MinisignKey[]): { ok: boolean; note: string } {
  if (keys.length === 0)
    return { ok: false, note: "The package was not verified: no trusted minisign key is configured." };
  if (source.signature === undefined) {
    return { ok: false, note: "The package was not verified: it came without a .minisig signature." };
  }
  try {
    verifyMinisign(source.bytes, source.signature, keys);
  } catch (error) {
    throw new DomainError(
      "invalid",
      `The package's signature is not valid, so it was not installed: ${errorMessage(error)}.`,
    );
  }
  return { ok: true, note: "The package's minisign signature was verified against a trusted key." };
}

import { createHash } from "node:crypto";
import {
  chmodSync,
  existsSync,
  lstatSync,
  mkdirSync,
  renameSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Mount, SystemEntry } from "./mounts.js";

/**
 * The namespaces without bubblewrap: util-linux's `unshare` (present on every Linux machine) gives
 * a run its own mount, PID, IPC and UTS namespaces (and, on request, an empty network namespace),
 * and a small shell script builds the run's root in it the way bubblewrap does, then
 * `pivot_root`s into it, so nothing else of this machine exists for the run:
 * - a tmpfs, filled from a skeleton prepared once (the system's symlinks such as /bin → usr/bin,
 *   /dev's links, empty files for the device nodes, /tmp and /dev/shm open to all);
 * - the system directories read-only, a private /proc and /dev/pts, this machine's null, zero,
 *   full, random, urandom and tty, all in one `mount -a` over an fstab prepared once;
 * - the caller's mounts, one `mount` each (a directory's mount point made with its parents, 755).
 * It needs root, which the service is whenever runs switch users (and that is when it matters: a
 * data directory under a mode-700 home is reachable through the run's mounts, not through the
 * machine's own paths).
 *
 * The script stays the namespace's first process and runs the command as its child (with the
 * environment it was given, and without the shell's own word on how it ended): a signal the
 * command does not handle still ends it (the first process of a PID namespace ignores those), and
 * when the script exits the kernel ends everything left in the namespace. `unshare --kill-child`
 * takes the namespace down when `unshare` dies, and `setpriv --pdeathsig` makes `unshare` die with
 * the service.
 */

export interface UnshareTools {
  setpriv: string;
  unshare: string;
  sh: string;
  mount: string;
  umount: string;
  pivotRoot: string;
  cp: string;
  mkdir: string;
  /** iproute2's `ip`, to bring loopback up in an empty network namespace; optional. */
  ip?: string | undefined;
}

/** What runs share: the mount point of their roots, the skeleton and the fstab. */
export interface UnshareBase {
  root: string;
  skeleton: string;
  fstab: string;
  /** Writes the skeleton and the fstab again if something removed them (a /tmp cleaner). */
  ensure(): void;
}

/** Device nodes of this machine every run gets (as bubblewrap's `--dev`). */
const DEVICES = ["null", "zero", "full", "random", "urandom", "tty"];

const SCRIPT = `set -e
mask=$(umask)
umask 022
mount=$1 umount=$2 pivot=$3 cp=$4 mkdir=$5 root=$6 skeleton=$7 fstab=$8 ip=$9
shift 9
cwd=$1
shift
"$mount" -t tmpfs -o mode=0755,nosuid,nodev tmpfs "$root"
"$cp" -a "$skeleton/." "$root/"
"$mount" -a -T "$fstab"
while [ "$1" != -- ]; do
  if [ "$1" = file ]; then
    "$mkdir" -p -- "$root\${4%/*}"
    : > "$root$4"
    "$mount" --bind -o "$2" "$3" "$root$4"
  else
    "$mount" --bind -o "$2,X-mount.mkdir" "$3" "$root$4"
  fi
  shift 4
done
shift
[ -z "$ip" ] || "$ip" link set lo up
cd "$root"
"$pivot" . .
"$umount" -l .
cd "$cwd"
unset PWD OLDPWD
umask "$mask"
set +e
exec 3>&2 2>/dev/null
(exec "$@" 2>&3 3>&-)
exit $?
`;

/**
 * Prepares, once per service, the directory runs' roots are mounted on and what every root
 * starts from. The directory is root's, mode 700, and its mount point stays empty for ever (every
 * mount on it lives in a run's own namespace). Returns why it cannot, instead, when it cannot.
 */
export function prepareUnshare(system: readonly SystemEntry[]): UnshareBase | string {
  const dir = ownDir();
  if (!dir) return "no directory of root's own for the sandbox's files (in /run or the temp directory)";
  const root = join(dir, "root");
  const lines = [
    ...system.flatMap((entry) =>
      entry.kind === "bind"
        ? [
            fstab(
              entry.source,
              root + entry.target,
              "none",
              `bind,ro,X-mount.mkdir${entry.optional ? ",nofail" : ""}`,
            ),
          ]
        : [],
    ),
    fstab("proc", `${root}/proc`, "proc", "nosuid,nodev,noexec"),
    fstab("devpts", `${root}/dev/pts`, "devpts", "newinstance,ptmxmode=0666,mode=620,nosuid,noexec,nofail"),
    ...DEVICES.map((name) => fstab(`/dev/${name}`, `${root}/dev/${name}`, "none", "bind")),
  ];
  const content = lines.join("");
  const hash = createHash("sha256")
    .update("skeleton 2")
    .update(content)
    .update(JSON.stringify(system))
    .digest("hex")
    .slice(0, 16);
  const base: UnshareBase = {
    root,
    skeleton: join(dir, `skeleton-${hash}`),
    fstab: join(dir, `mounts-${hash}.fstab`),
    ensure() {
      if (!existsSync(root)) mkdirSync(root, { mode: 0o700 });
      if (!existsSync(base.fstab)) writeAtomically(base.fstab, content);
      if (!existsSync(join(base.skeleton, "dev", "stderr"))) writeSkeleton(base.skeleton, system);
    },
  };
  try {
    base.ensure();
  } catch (error) {
    return `the sandbox's files could not be written: ${(error as Error).message}`;
  }
  return base;
}

export function unshareArgs(options: {
  tools: UnshareTools;
  base: UnshareBase;
  mounts: readonly Mount[];
  network: boolean;
  cwd: string;
  command: readonly string[];
}): { command: string; args: string[] } {
  const { tools, base } = options;
  const mounts: string[] = [];
  for (const mount of options.mounts) {
    if (mount.source.includes("\n") || mount.target.includes("\n")) {
      throw new Error(`A sandbox mount cannot have a newline in its path: ${JSON.stringify(mount.target)}`);
    }
    const kind = isDirectory(mount.source) ? "dir" : "file";
    mounts.push(kind, mount.writable ? "rw" : "ro", mount.source, mount.target);
  }
  const args = [
    "--pdeathsig",
    "SIGKILL",
    "--",
    tools.unshare,
    "--mount",
    "--pid",
    "--ipc",
    "--uts",
    ...(options.network ? [] : ["--net"]),
    "--kill-child",
    "--propagation",
    "private",
    "--",
    tools.sh,
    "-c",
    SCRIPT,
    "sandbox",
    tools.mount,
    tools.umount,
    tools.pivotRoot,
    tools.cp,
    tools.mkdir,
    base.root,
    base.skeleton,
    base.fstab,
    options.network ? "" : (tools.ip ?? ""),
    options.cwd,
    ...mounts,
    "--",
    ...options.command,
  ];
  return { command: tools.setpriv, args };
}

/** `/run/stavrobot-sandbox` (or one in the temp directory), root's and closed to others. */
function ownDir(): string | undefined {
  const candidates = [join("/run", "stavrobot-sandbox"), join(tmpdir(), ".stavrobot-sandbox")];
  for (const dir of candidates) {
    try {
      mkdirSync(dir, { mode: 0o700 });
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== "EEXIST") continue;
    }
    const info = lstatSync(dir);
    // One planted by someone else (the temp directory is everyone's) is not used.
    if (info.isDirectory() && info.uid === 0 && (info.mode & 0o077) === 0) return dir;
  }
  return undefined;
}

/** The top of every run's root: the system's symlinks, /dev's links and nodes' mount points. */
function writeSkeleton(dir: string, system: readonly SystemEntry[]): void {
  const staging = `${dir}.${process.pid}.tmp`;
  rmSync(staging, { recursive: true, force: true });
  mkdirSync(join(staging, "dev", "pts"), { recursive: true, mode: 0o755 });
  for (const name of ["proc", "tmp", "dev/shm"]) mkdirSync(join(staging, name), { mode: 0o755 });
  for (const entry of system)
    if (entry.kind === "symlink") symlinkSync(entry.value, join(staging, entry.path));
  for (const name of DEVICES) writeFileSync(join(staging, "dev", name), "", { mode: 0o644 });
  symlinkSync("/proc/self/fd", join(staging, "dev", "fd"));
  symlinkSync("pts/ptmx", join(staging, "dev", "ptmx"));
  ["stdin", "stdout", "stderr"].forEach((name, fd) =>
    symlinkSync(`/proc/self/fd/${fd}`, join(staging, "dev", name)),
  );
  // Modes set after creation: the process umask may be anything (the app's is 077), and `cp -a`
  // gives the run's root the skeleton's own mode, so a 700 here would shut every user but root out.
  for (const name of ["", "dev", "dev/pts", "proc"]) chmodSync(join(staging, name), 0o755);
  for (const name of ["tmp", "dev/shm"]) chmodSticky(join(staging, name));
  rmSync(dir, { recursive: true, force: true });
  renameSync(staging, dir);
}

/** 1777, as /tmp: everyone may create, nobody may remove what is not theirs. */
function chmodSticky(path: string): void {
  chmodSync(path, 0o1777);
}

function writeAtomically(path: string, content: string): void {
  const staging = `${path}.${process.pid}.tmp`;
  writeFileSync(staging, content, { mode: 0o600 });
  renameSync(staging, path);
}

/** One fstab line; spaces, tabs, newlines and backslashes in paths are written as octal escapes. */
function fstab(source: string, target: string, type: string, options: string): string {
  return `${escape(source)} ${escape(target)} ${type} ${options} 0 0\n`;
}

function escape(path: string): string {
  return path.replace(/[ \t\n\\]/g, (char) => `\\${char.charCodeAt(0).toString(8).padStart(3, "0")}`);
}

function isDirectory(path: string): boolean {
  try {
    return statSync(path).isDirectory();
  } catch {
    return true; // A missing source fails its mount, which says so.
  }
}

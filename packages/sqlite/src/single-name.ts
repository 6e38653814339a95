import { readFileSync, realpathSync, statSync } from "node:fs";
import { TesseraError } from "@tessera/core";

/**
 * SQLite finds a database's WAL and shared-memory index by the name it was opened with
 * (`<name>-wal`, `<name>-shm`), and its WAL locks live in that `-shm` file. So two processes
 * that reach one file under two names — a hard link, or a bind mount of the file alone (a
 * container that mounts only the database) — each append to their own WAL and never see the
 * other's commits: every call ID is claimed twice and every single-use ticket spent twice,
 * and the device+inode check cannot tell, since both names lead to the same inode. A
 * directory shared or mounted as a whole keeps one WAL and one index beside the file, which
 * is why the advice is to share the directory, never the file.
 */
export const SHARE_THE_DIRECTORY = "share or mount the directory, never the file";

const SIDE_FILES = ["", "-wal", "-shm"] as const;

/**
 * Refuses, with `store_file_shared`, a database whose file or side files have more than one
 * hard link or are mount points (Linux: from /proc/self/mountinfo; elsewhere only the link
 * count is checked). Files that do not exist yet are skipped: SQLite creates the side files
 * at open, so this runs once before and once after opening.
 */
export function refuseSecondName(path: string): void {
  const existing: string[] = [];
  for (const suffix of SIDE_FILES) {
    const name = `${path}${suffix}`;
    let links: number;
    try {
      const stats = statSync(name);
      // Not a regular file (a directory counts its subdirectories as links): SQLite refuses it.
      if (!stats.isFile()) continue;
      links = stats.nlink;
    } catch {
      continue;
    }
    if (links > 1) refuse(`${tail(name)} has ${links} hard links`);
    existing.push(name);
  }
  const mounts = mountPoints();
  for (const name of existing) {
    let real: string;
    try {
      real = realpathSync.native(name);
    } catch {
      continue;
    }
    if (mounts.has(real)) refuse(`${tail(name)} is itself a mount point`);
  }
}

function refuse(why: string): never {
  throw new TesseraError(
    "store_file_shared",
    `${why}: the file has a second name; ${SHARE_THE_DIRECTORY}`,
  );
}

/** The last path segment only: enough to tell which file, without echoing the deployment. */
function tail(name: string): string {
  return name.slice(name.lastIndexOf("/") + 1);
}

/**
 * Mount points seen by this process. A missing /proc (not Linux) yields none; the link
 * count still guards there.
 */
function mountPoints(): ReadonlySet<string> {
  let table: string;
  try {
    table = readFileSync("/proc/self/mountinfo", "utf8");
  } catch {
    return new Set();
  }
  const points = new Set<string>();
  for (const line of table.split("\n")) {
    // "id parent major:minor root mount-point options …": the fifth field, octal-escaped.
    const field = line.split(" ")[4];
    if (field)
      points.add(
        field.replace(/\\([0-7]{3})/g, (_, octal) =>
          String.fromCharCode(Number.parseInt(octal, 8)),
        ),
      );
  }
  return points;
}

/**
 * Which daemon a client agrees to talk to. Without XDG_RUNTIME_DIR the default socket is
 * /tmp/askbus-<uid>/askbus.sock, a path another local user can create first; whoever listens
 * there would read the questions and answer them. Node cannot ask a Unix socket for its peer's
 * credentials (SO_PEERCRED), so this client checks the files instead, before connecting: the
 * socket must belong to this process's uid or root (bind() makes the binder its owner, and
 * nobody else can hand a socket to us), and its directory must not be a symlink nor let
 * another user swap the socket (owned by a trusted uid, not writable by group or others
 * unless sticky).
 *
 * A shared bus run by another account is named explicitly in ASKBUS_DAEMON_UID (a uid, or
 * several separated by commas): the same rule as the Rust and Python clients'.
 */

import { lstatSync } from "node:fs";
import { dirname } from "node:path";

import { UntrustedDaemon } from "./errors.js";

export const DAEMON_UID_ENV = "ASKBUS_DAEMON_UID";

function ownUid(): number {
  return process.geteuid?.() ?? -1;
}

export function trustedUid(uid: number, allowed: string | undefined = process.env[DAEMON_UID_ENV]): boolean {
  if (uid === ownUid() || uid === 0) return true;
  return (allowed ?? "")
    .split(",")
    .map((u) => u.trim())
    .some((u) => /^\d+$/.test(u) && Number(u) === uid);
}

/** Throws UntrustedDaemon when the socket at `path` (or its directory) is another user's.
 * A path that cannot be examined is left to connect(), which reports why. */
export function checkSocket(path: string): void {
  if (ownUid() < 0) return; // not POSIX: nothing to ask
  let sock;
  let dir;
  try {
    sock = lstatSync(path);
    dir = lstatSync(dirname(path));
  } catch {
    return;
  }
  if (!trustedUid(sock.uid)) {
    throw new UntrustedDaemon(path, `its socket belongs to uid ${sock.uid}`, sock.uid);
  }
  if (dir.isSymbolicLink()) {
    throw new UntrustedDaemon(path, `its directory ${dirname(path)} is a symlink`, dir.uid);
  }
  if (!trustedUid(dir.uid)) {
    throw new UntrustedDaemon(path, `its directory ${dirname(path)} belongs to uid ${dir.uid}`, dir.uid);
  }
  const sticky = (dir.mode & 0o1000) !== 0;
  if ((dir.mode & 0o022) !== 0 && !sticky) {
    throw new UntrustedDaemon(
      path,
      `its directory ${dirname(path)} is writable by others (mode ${(dir.mode & 0o7777).toString(8)})`,
      dir.uid,
    );
  }
}

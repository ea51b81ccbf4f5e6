/**
 * Where the daemon listens when nobody says: the same resolution as askbusd's own
 * (`src/paths.rs`), so a client and the daemon agree without configuration.
 */

function nonEmptyEnv(name: string): string | undefined {
  const v = process.env[name];
  return v === undefined || v === "" ? undefined : v;
}

/**
 * `$ASKBUS_SOCKET`, else `$XDG_RUNTIME_DIR/askbus.sock`, else `/run/askbus/askbus.sock` for
 * root, else `/tmp/askbus-<uid>/askbus.sock`.
 */
export function defaultSocketPath(): string {
  const explicit = nonEmptyEnv("ASKBUS_SOCKET");
  if (explicit !== undefined) return explicit;
  const runtime = nonEmptyEnv("XDG_RUNTIME_DIR");
  // Joined as Rust's Path::join does (no normalization), so both name the very same path.
  if (runtime !== undefined) return runtime.endsWith("/") ? `${runtime}askbus.sock` : `${runtime}/askbus.sock`;
  // geteuid is absent only on Windows, where there is no Unix-socket daemon to find anyway.
  const uid = process.geteuid?.() ?? 0;
  return uid === 0 ? "/run/askbus/askbus.sock" : `/tmp/askbus-${uid}/askbus.sock`;
}

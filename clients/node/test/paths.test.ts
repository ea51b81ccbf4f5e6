/**
 * Default socket resolution: the same path the daemon picks for the same environment (checked
 * against the real askbusd, started without --socket), and the fallbacks by uid.
 */

import assert from "node:assert/strict";
import { execFileSync, spawn } from "node:child_process";
import { join } from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";

import { daemonBinary, tempDir } from "./helpers.js";

const pathsModule = fileURLToPath(new URL("../src/paths.js", import.meta.url));

/** defaultSocketPath() as computed in a fresh process with exactly `env`. */
function clientPath(env: NodeJS.ProcessEnv): string {
  const code = `import(${JSON.stringify(pathsModule)}).then((m) => process.stdout.write(m.defaultSocketPath()))`;
  return execFileSync(process.execPath, ["-e", code], { env: { PATH: process.env.PATH, ...env } }).toString();
}

/** The path askbusd announces when started with `env` and no --socket. */
function daemonPath(env: NodeJS.ProcessEnv): Promise<string> {
  return new Promise((resolve, reject) => {
    const proc = spawn(daemonBinary(), ["--no-telemetry"], { env: { PATH: process.env.PATH, ...env }, stdio: ["ignore", "ignore", "pipe"] });
    let err = "";
    proc.stderr!.on("data", (c: Buffer) => {
      err += c.toString();
      const m = /askbusd ready on (\S+)/.exec(err);
      if (m) {
        proc.kill("SIGTERM");
        resolve(m[1]!);
      }
    });
    proc.once("exit", (code) => (/ready on/.test(err) ? undefined : reject(new Error(`askbusd exited ${code}: ${err}`))));
  });
}

test("ASKBUS_SOCKET wins, as in the daemon", async () => {
  const dir = tempDir();
  const env = { ASKBUS_SOCKET: join(dir, "explicit.sock"), XDG_RUNTIME_DIR: dir };
  assert.equal(clientPath(env), join(dir, "explicit.sock"));
  assert.equal(await daemonPath(env), clientPath(env));
});

test("then $XDG_RUNTIME_DIR/askbus.sock, joined as the daemon joins it", async () => {
  const dir = tempDir();
  for (const xdg of [dir, `${dir}/`]) {
    const env = { XDG_RUNTIME_DIR: xdg, ASKBUS_SOCKET: "" };
    assert.equal(clientPath(env), `${dir}/askbus.sock`);
    assert.equal(await daemonPath(env), clientPath(env));
  }
});

test("without either: /run/askbus for root, /tmp/askbus-<uid> for others", () => {
  const uid = process.geteuid!();
  const want = uid === 0 ? "/run/askbus/askbus.sock" : `/tmp/askbus-${uid}/askbus.sock`;
  assert.equal(clientPath({ XDG_RUNTIME_DIR: "", ASKBUS_SOCKET: "" }), want);
  assert.equal(clientPath({}), want);
});

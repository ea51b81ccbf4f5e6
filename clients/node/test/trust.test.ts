/**
 * Who the client agrees to talk to (src/trust.ts): a socket of another uid, or one in a
 * directory another user could swap it in (a symlink, a non-sticky directory writable by
 * others), is refused before a byte is sent; ASKBUS_DAEMON_UID names a trusted shared bus.
 * The same attack with real uids against the CLI and the Python client: tests/e2e/shared_machine.rs.
 */

import assert from "node:assert/strict";
import { chmodSync, chownSync, mkdirSync, symlinkSync } from "node:fs";
import { createServer, type Server } from "node:net";
import { join } from "node:path";
import { test } from "node:test";

import { Connection } from "../src/connection.js";
import { UntrustedDaemon } from "../src/errors.js";
import { checkSocket, trustedUid } from "../src/trust.js";
import { tempDir } from "./helpers.js";

function listen(path: string): Promise<Server> {
  return new Promise((resolve) => {
    const server = createServer((s) => s.end());
    server.listen(path, () => resolve(server));
  });
}

const handlers = { frame() {}, close() {} };

test("own uid and root are trusted; others only when named", () => {
  const own = process.geteuid!();
  const other = own + 4242;
  assert.ok(trustedUid(own, undefined));
  assert.ok(trustedUid(0, undefined));
  assert.ok(!trustedUid(other, undefined));
  assert.ok(!trustedUid(other, "1,2"));
  assert.ok(trustedUid(other, `1, ${other}`));
});

test("a socket in a symlinked or world-writable directory is refused; a private one is used", async () => {
  const base = tempDir();
  const real = join(base, "real");
  mkdirSync(real, { mode: 0o700 });
  const server = await listen(join(real, "askbus.sock"));
  try {
    checkSocket(join(real, "askbus.sock"));
    const conn = await Connection.open(join(real, "askbus.sock"), handlers);
    conn.close();

    symlinkSync(real, join(base, "link"));
    assert.throws(() => checkSocket(join(base, "link", "askbus.sock")), (e: unknown) => {
      assert.ok(e instanceof UntrustedDaemon);
      assert.equal(e.code, "untrusted-daemon");
      assert.match(e.message, /is a symlink/);
      return true;
    });
    await assert.rejects(Connection.open(join(base, "link", "askbus.sock"), handlers), UntrustedDaemon);

    chmodSync(real, 0o777);
    assert.throws(() => checkSocket(join(real, "askbus.sock")), /writable by others \(mode 777\)/);
    chmodSync(real, 0o1777);
    checkSocket(join(real, "askbus.sock")); // sticky: nobody else can swap our socket
    chmodSync(real, 0o700);

    if (process.geteuid!() === 0) {
      // Run as root (CI): a socket another uid bound is refused unless that uid is named.
      chownSync(join(real, "askbus.sock"), 61299, 61299);
      assert.throws(() => checkSocket(join(real, "askbus.sock")), /belongs to uid 61299.*ASKBUS_DAEMON_UID=61299/);
      process.env.ASKBUS_DAEMON_UID = "61299";
      try {
        checkSocket(join(real, "askbus.sock"));
      } finally {
        delete process.env.ASKBUS_DAEMON_UID;
      }
    }
  } finally {
    server.close();
  }
});

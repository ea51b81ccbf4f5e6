/**
 * A refused connect is retried briefly (src/connection.ts), as the Rust and Python clients do:
 * a daemon restarting (ECONNREFUSED) or too busy to accept (EAGAIN) is waited for, a missing
 * socket is not. The socket is real: a small Python process binds it without listening (Node
 * cannot), and listens when told. It is told when the client, refused once, arms the timer for
 * its next attempt, and that timer fires only once the socket listens: the order of events
 * decides, no timing does.
 */

import assert from "node:assert/strict";
import { spawn, type ChildProcessByStdio } from "node:child_process";
import { once } from "node:events";
import { join } from "node:path";
import { createInterface } from "node:readline";
import type { Readable, Writable } from "node:stream";
import { test } from "node:test";

import { Connection } from "../src/connection.js";
import { DaemonUnreachable } from "../src/errors.js";
import { tempDir } from "./helpers.js";

const handlers = { frame() {}, close() {} };

const HELPER = `
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.bind(sys.argv[1])
print("bound", flush=True)
for line in sys.stdin:
    if line.strip() == "listen":
        s.listen(16)
        print("listening", flush=True)
        c, _ = s.accept()
        print("accepted", flush=True)
`;

async function boundNotListening(path: string): Promise<{ child: ChildProcessByStdio<Writable, Readable, null>; lines: AsyncIterableIterator<string> }> {
  const child = spawn("python3", ["-c", HELPER, path], { stdio: ["pipe", "pipe", "inherit"] });
  const lines = createInterface({ input: child.stdout })[Symbol.asyncIterator]();
  const first = await lines.next();
  assert.equal(first.value, "bound");
  return { child, lines };
}

test("a refused connect is retried until the daemon listens", async () => {
  const path = join(tempDir(), "askbus.sock");
  const { child, lines } = await boundNotListening(path);
  const realSetTimeout = globalThis.setTimeout;
  const waits: number[] = [];
  // The client's pause before its next attempt: let it run only once the socket listens.
  globalThis.setTimeout = ((cb: () => void, ms?: number) => {
    waits.push(ms ?? 0);
    child.stdin.write("listen\n");
    void lines.next().then((l) => {
      assert.equal(l.value, "listening");
      realSetTimeout(cb, 0);
    });
    return 0 as unknown as NodeJS.Timeout;
  }) as typeof setTimeout;
  let conn: Connection;
  try {
    conn = await Connection.open(path, handlers);
  } finally {
    globalThis.setTimeout = realSetTimeout;
  }
  assert.deepEqual(waits.length, 1, `${waits}`);
  assert.ok(waits[0] <= 200, `${waits}`);
  assert.equal((await lines.next()).value, "accepted");
  conn.close();
  child.kill();
  await once(child, "exit");
});

test("a missing socket fails at once, without a retry", async () => {
  const path = join(tempDir(), "askbus.sock");
  const realSetTimeout = globalThis.setTimeout;
  let armed = 0;
  globalThis.setTimeout = ((cb: () => void, ms?: number) => {
    armed += 1;
    return realSetTimeout(cb, ms);
  }) as typeof setTimeout;
  try {
    await assert.rejects(Connection.open(path, handlers), DaemonUnreachable);
  } finally {
    globalThis.setTimeout = realSetTimeout;
  }
  assert.equal(armed, 0);
});

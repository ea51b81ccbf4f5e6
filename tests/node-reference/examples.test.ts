/**
 * clients/node/examples/gemini-bridge.mjs as an agent would run it: beside an installed
 * @google/gemini-cli-core and the askbus package (this package depends on both), its
 * MessageBus request answered by a UI through the real daemon.
 */

import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { copyFileSync, mkdirSync } from "node:fs";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { fileURLToPath } from "node:url";

import { subscribe } from "../../clients/node/src/index.js";
import { closeLater, REPO_ROOT, startDaemon, within, type Daemon } from "../../clients/node/test/helpers.js";

let d: Daemon;
before(async () => {
  d = await startDaemon();
});
after(async () => {
  await d.stop();
  d.cleanup();
});

test("gemini-bridge.mjs gets its MessageBus request answered by a UI", async () => {
  // Run from inside this package, where both of its imports resolve as in a user's project.
  const here = fileURLToPath(new URL("../../examples/", import.meta.url));
  mkdirSync(here, { recursive: true });
  const script = join(here, "gemini-bridge.mjs");
  copyFileSync(join(REPO_ROOT, "clients/node/examples/gemini-bridge.mjs"), script);

  const sub = closeLater(subscribe({ socket: d.socket }));
  await sub.ready;
  const answered = (async () => {
    for await (const req of sub) {
      await req.answer({ "0": "Yes" });
      break;
    }
  })();
  const child = spawn(process.execPath, [script], {
    env: { ...process.env, ASKBUS_SOCKET: d.socket },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let out = "";
  let err = "";
  child.stdout.on("data", (c: Buffer) => (out += c.toString()));
  child.stderr.on("data", (c: Buffer) => (err += c.toString()));
  const code = await within(new Promise<number | null>((r) => child.once("exit", r)), 20_000, "gemini-bridge.mjs");
  assert.equal(code, 0, err);
  await answered;
  assert.match(out, /answer: Yes/);
});

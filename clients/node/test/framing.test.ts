/**
 * Framing: the 4-byte big-endian prefix, frames split and joined arbitrarily across chunks,
 * oversized announcements refused before buffering, unreadable payloads reported.
 */

import assert from "node:assert/strict";
import { test } from "node:test";

import { encodeFrame, FrameDecoder, parseServerFrame, ProtocolError } from "../src/index.js";

test("the prefix is the payload's UTF-8 length, big-endian", () => {
  const buf = encodeFrame({ type: "ping", id: "é" });
  const json = '{"type":"ping","id":"é"}';
  assert.equal(buf.readUInt32BE(0), Buffer.byteLength(json));
  assert.equal(buf.subarray(4).toString("utf8"), json);
});

test("frames split at every byte boundary and joined in one chunk decode the same", () => {
  const frames = [{ type: "pong", id: 1 }, { type: "subscribed", pending: 0 }, { type: "x", s: "ü".repeat(300) }];
  const stream = Buffer.concat(frames.map((f) => encodeFrame(f)));
  for (const step of [1, 2, 3, 5, 64, stream.length]) {
    const d = new FrameDecoder();
    const out: unknown[] = [];
    for (let i = 0; i < stream.length; i += step) {
      for (const p of d.push(stream.subarray(i, i + step))) out.push(JSON.parse(p.toString("utf8")));
    }
    assert.deepEqual(out, frames, `step ${step}`);
    assert.equal(d.pendingBytes, 0);
  }
});

test("a length beyond the limit is refused before its payload arrives", () => {
  const d = new FrameDecoder(1024);
  const head = Buffer.alloc(4);
  head.writeUInt32BE(1025);
  assert.throws(() => d.push(head), ProtocolError);
});

test("an unfinished frame is visible as pending bytes", () => {
  const d = new FrameDecoder();
  const f = encodeFrame({ type: "pong" });
  assert.deepEqual(d.push(f.subarray(0, 6)), []);
  assert.equal(d.pendingBytes, 6);
});

test("payloads that are not frames are protocol errors", () => {
  assert.throws(() => parseServerFrame("not json"), ProtocolError);
  assert.throws(() => parseServerFrame("[1]"), ProtocolError);
  assert.throws(() => parseServerFrame('{"type":3}'), ProtocolError);
  assert.deepEqual(parseServerFrame('{"type":"future-frame","x":1}'), { type: "future-frame", x: 1 });
});

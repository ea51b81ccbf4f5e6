#!/usr/bin/env python3
"""How fast `askbus hook` gets its request onto the socket, and what a whole hook costs.

Two measurements, for BENCHMARKS.md (not a test: nothing here passes or fails):

1. start-to-request: this script listens on a Unix socket itself, speaking just enough of the
   protocol (a welcome, then the terminal frame), starts `askbus hook gemini` with a recorded
   BeforeTool input, and times from just before the process is spawned to the moment the whole
   tool-confirmation-request frame has been read. This is the hook's own cost before a person
   can be asked: process start, argument parsing, reading stdin, building the details,
   connecting and writing.
2. whole hook vs bare ask, side by side: a real askbusd and a UI that answers every request the
   moment it arrives; alternately, one `askbus hook gemini` (Allow) and one `askbus ask` of one
   question, each timed from spawn to exit.

Usage: scripts/hook-latency.py [--askbus PATH] [--askbusd PATH] [--runs N]
(defaults: target/release/askbus and askbusd).
"""

import argparse
import json
import os
import socket
import statistics
import struct
import subprocess
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

INPUT = json.dumps(
    {
        "session_id": "9c876a06-660c-46ce-9c90-901ff9f98181",
        "transcript_path": "/tmp/x/chats/session.json",
        "cwd": "/tmp",
        "hook_event_name": "BeforeTool",
        "timestamp": "2026-12-03T18:40:58.915Z",
        "tool_name": "run_shell_command",
        "tool_input": {"command": "rm -rf build && cargo build", "description": "rebuild"},
    }
).encode()

QUESTION = json.dumps(
    [{"question": "Proceed?", "header": "Go", "type": "yesno"}]
).encode()


def send(sock, frame):
    body = json.dumps(frame).encode()
    sock.sendall(struct.pack(">I", len(body)) + body)


def recv(sock, buf):
    while True:
        if len(buf) >= 4:
            (n,) = struct.unpack(">I", buf[:4])
            if len(buf) >= 4 + n:
                frame = json.loads(buf[4 : 4 + n])
                del buf[: 4 + n]
                return frame
        chunk = sock.recv(65536)
        if not chunk:
            return None
        buf.extend(chunk)


def start_to_request(askbus, runs):
    d = tempfile.mkdtemp(prefix="askbus-hook-lat-")
    path = os.path.join(d, "s.sock")
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(path)
    srv.listen(8)
    samples = []
    for _ in range(runs):
        t0 = time.perf_counter()
        p = subprocess.Popen(
            [askbus, "--socket", path, "hook", "gemini"],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        p.stdin.write(INPUT)
        p.stdin.close()
        conn, _ = srv.accept()
        buf = bytearray()
        while True:
            f = recv(conn, buf)
            if f is None:
                raise SystemExit("the hook hung up before its request")
            if f["type"] == "tool-confirmation-request":
                samples.append(time.perf_counter() - t0)
                break
        send(
            conn,
            {
                "type": "welcome",
                "protocol": 1,
                "server": "latency-script",
                "maxFrameBytes": 1048576,
                "defaultTimeoutMs": 600000,
                "maxTimeoutMs": 86400000,
            },
        )
        send(
            conn,
            {
                "type": "tool-confirmation-response",
                "correlationId": f["correlationId"],
                "confirmed": True,
                "outcome": "proceed_once",
                "reason": "answered",
            },
        )
        p.wait()
        conn.close()
    srv.close()
    return samples


def auto_ui(path, stop, ready):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(path)
    send(s, {"type": "hello", "protocol": 1, "client": "latency-ui"})
    send(s, {"type": "subscribe"})
    buf = bytearray()
    while not stop.is_set():
        f = recv(s, buf)
        if f is None:
            return
        if f["type"] == "subscribed":
            ready.set()
        elif f["type"] == "ask-user-request":
            send(s, {"type": "ask-user-response", "correlationId": f["correlationId"], "answers": {"0": "Yes"}})
        elif f["type"] == "tool-confirmation-request":
            send(
                s,
                {
                    "type": "tool-confirmation-response",
                    "correlationId": f["correlationId"],
                    "confirmed": True,
                    "outcome": "proceed_once",
                },
            )


def side_by_side(askbus, askbusd, runs):
    d = tempfile.mkdtemp(prefix="askbus-hook-side-")
    path = os.path.join(d, "s.sock")
    daemon = subprocess.Popen([askbusd, "--socket", path, "--no-telemetry"], stderr=subprocess.PIPE)
    for line in daemon.stderr:
        if b"askbusd ready on" in line:
            break
    stop, ready = threading.Event(), threading.Event()
    threading.Thread(target=auto_ui, args=(path, stop, ready), daemon=True).start()
    ready.wait(10)
    hook, ask = [], []
    for _ in range(runs):
        t0 = time.perf_counter()
        r = subprocess.run([askbus, "--socket", path, "hook", "gemini"], input=INPUT, capture_output=True)
        hook.append(time.perf_counter() - t0)
        assert r.returncode == 0, r.stderr
        t0 = time.perf_counter()
        r = subprocess.run([askbus, "--socket", path, "ask"], input=QUESTION, capture_output=True)
        ask.append(time.perf_counter() - t0)
        assert r.returncode == 0, r.stderr
    stop.set()
    daemon.terminate()
    daemon.wait()
    return hook, ask


def summary(name, xs):
    xs = sorted(xs)
    p95 = xs[min(len(xs) - 1, int(len(xs) * 0.95))]
    print(f"{name:<38} median {statistics.median(xs) * 1000:7.2f} ms   p95 {p95 * 1000:7.2f} ms   (n={len(xs)})")
    return statistics.median(xs)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--askbus", default=os.path.join(ROOT, "target/release/askbus"))
    ap.add_argument("--askbusd", default=os.path.join(ROOT, "target/release/askbusd"))
    ap.add_argument("--runs", type=int, default=200)
    a = ap.parse_args()
    summary("hook start -> request on the socket", start_to_request(a.askbus, a.runs))
    hook, ask = side_by_side(a.askbus, a.askbusd, a.runs)
    h = summary("askbus hook gemini, answered at once", hook)
    q = summary("askbus ask (one question), answered", ask)
    print(f"ratio hook / ask (medians): {h / q:.2f}")


if __name__ == "__main__":
    main()

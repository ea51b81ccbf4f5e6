#!/usr/bin/env python3
"""Federation scale figures (issue 30): N askbusd nodes on one stock nats-server, idle.

For each N: the server's subscriptions (its /subsz), the server's CPU while idle, each
askbusd's CPU while idle (nothing pending), and the messages the server routes per second.
Then the fit of each figure against N (constant, linear, quadratic: least squares, with the
best by residual). Beside the benches (`askbus bench federation` has the round-trip ratios
against raw NATS); rerunnable:

    scripts/fed-scale.py [--bin target/release/askbusd] [--nodes 2,8,16,32,64] [--idle 10]
"""

import argparse
import json
import os
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.request


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cpu_ms(pid):
    """User + system CPU of `pid` so far, in ms."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    ticks = int(fields[11]) + int(fields[12])
    return ticks * 1000 / os.sysconf("SC_CLK_TCK")


def monitor(port, path):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as r:
        return json.load(r)


def stats(sock):
    """askbusd's stats frame, through its socket (protocol v1: a hello, then stats)."""
    with socket.socket(socket.AF_UNIX) as s:
        s.settimeout(10)
        s.connect(sock)
        f = s.makefile("rwb")
        for frame in ({"type": "hello", "protocol": 1, "client": "fed-scale"},
                      {"type": "stats"}):
            body = json.dumps(frame).encode()
            f.write(len(body).to_bytes(4, "big") + body)
        f.flush()
        while True:
            n = int.from_bytes(f.read(4), "big")
            v = json.loads(f.read(n))
            if v.get("type") == "stats":
                return v


def run(n, args):
    tmp = tempfile.mkdtemp(prefix="askbus-scale-")
    port, mport = free_port(), free_port()
    nats = subprocess.Popen([args.nats, "-a", "127.0.0.1", "-p", str(port), "-m", str(mport)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    nodes = []
    try:
        for _ in range(100):
            try:
                base = monitor(mport, "/subsz")["num_subscriptions"]
                break
            except OSError:
                time.sleep(0.05)
        t0 = time.monotonic()
        for i in range(n):
            d = os.path.join(tmp, f"n{i}")
            os.makedirs(d)
            env = dict(os.environ, ASKBUS_LOG="warn", ASKBUS_POLICIES="off", XDG_CONFIG_HOME=d)
            p = subprocess.Popen([args.bin, "--socket", f"{d}/s", "--no-store", "--nats",
                                  f"nats://127.0.0.1:{port}", "--node", f"n{i}"],
                                 env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            nodes.append((p, f"{d}/s"))
        for _, sock in nodes:
            while not os.path.exists(sock):
                time.sleep(0.01)
        # Formed: every node sees the n - 1 others.
        for _, sock in nodes:
            while len(stats(sock).get("federation", {}).get("nodes", [])) < n - 1:
                time.sleep(0.05)
        formed = time.monotonic() - t0
        time.sleep(1)
        v0 = monitor(mport, "/varz")
        s0, c0 = cpu_ms(nats.pid), [cpu_ms(p.pid) for p, _ in nodes]
        time.sleep(args.idle)
        v1 = monitor(mport, "/varz")
        s1, c1 = cpu_ms(nats.pid), [cpu_ms(p.pid) for p, _ in nodes]
        subs = monitor(mport, "/subsz")["num_subscriptions"] - base
        per_node = [(b - a) / args.idle for a, b in zip(c0, c1)]
        return {
            "nodes": n,
            "formed_s": round(formed, 2),
            "server_subscriptions": subs,
            "server_idle_cpu_ms_per_s": round((s1 - s0) / args.idle, 3),
            "server_msgs_per_s": round((v1["out_msgs"] - v0["out_msgs"]) / args.idle, 2),
            "node_idle_cpu_ms_per_s_max": round(max(per_node), 3),
            "node_idle_cpu_ms_per_s_mean": round(sum(per_node) / n, 3),
        }
    finally:
        for p, _ in nodes:
            p.terminate()
        for p, _ in nodes:
            p.wait()
        nats.terminate()
        nats.wait()
        shutil.rmtree(tmp, ignore_errors=True)


def fit(xs, ys):
    """Least-squares fits y = a, y = a + b n, y = a + b n + c n^2; the residual of each."""
    def solve(cols):
        m = [[sum(ci[k] * cj[k] for k in range(len(xs))) for cj in cols] for ci in cols]
        v = [sum(ci[k] * ys[k] for k in range(len(xs))) for ci in cols]
        size = len(cols)
        for i in range(size):  # Gauss-Jordan
            piv = m[i][i] or 1e-12
            for j in range(size):
                if j != i:
                    f = m[j][i] / piv
                    m[j] = [a - f * b for a, b in zip(m[j], m[i])]
                    v[j] -= f * v[i]
        coef = [v[i] / (m[i][i] or 1e-12) for i in range(size)]
        res = sum((ys[k] - sum(c * col[k] for c, col in zip(coef, cols))) ** 2 for k in range(len(xs)))
        return [round(c, 4) for c in coef], res

    one = [1.0] * len(xs)
    n1 = [float(x) for x in xs]
    n2 = [float(x) ** 2 for x in xs]
    out = {}
    for name, cols in (("constant", [one]), ("linear", [one, n1]), ("quadratic", [one, n1, n2])):
        if len(xs) > len(cols):
            out[name] = solve(cols)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", default="target/debug/askbusd")
    ap.add_argument("--nats", default=os.environ.get("NATS_SERVER", "nats-server"))
    ap.add_argument("--nodes", default="2,8,16,32,64")
    ap.add_argument("--idle", type=float, default=10.0)
    args = ap.parse_args()
    rows = [run(int(n), args) for n in args.nodes.split(",")]
    for r in rows:
        print(json.dumps(r))
    xs = [r["nodes"] for r in rows]
    for key in ("server_subscriptions", "server_idle_cpu_ms_per_s", "server_msgs_per_s",
                "node_idle_cpu_ms_per_s_max"):
        print(key, json.dumps(fit(xs, [r[key] for r in rows])))


if __name__ == "__main__":
    main()

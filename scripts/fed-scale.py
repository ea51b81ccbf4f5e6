#!/usr/bin/env python3
"""Federation scale figures (issue 30): N askbusd nodes on one stock nats-server, idle.

For each N: the server's subscriptions (its /subsz), the server's CPU while idle, each
askbusd's CPU while idle (nothing pending), and the messages the server routes per second.
Then the fit of each figure against N (constant, linear, quadratic: least squares, with the
best by residual). Beside the benches (`askbus bench federation` has the round-trip ratios
against raw NATS); rerunnable:

    scripts/fed-scale.py [--bin target/release/askbusd] [--nodes 2,8,16,32,64] [--idle 10]
                         [--show 100] [--reconcile 16 --pending 10000]

`--show K` adds, for each N, the p50 of a question's show: asked on node 0 until the UIs on
all N - 1 other nodes have it, against a raw core NATS fan-out of a payload of the share's size
to N - 1 subscribers through the same server (both sides read by this one process, so the
reading costs the same on each). `--reconcile N` runs the restart scenario instead: N nodes,
`--pending` questions asked on node 0 and shown by all the others (their RSS per question
beyond the frame, their idle CPU), then nats-server SIGKILLed, a fifth of them withdrawn and a
tenth more asked while it is away, and the time from the server's restart until every node
shows exactly node 0's pending again.
"""

import argparse
import json
import selectors
import signal
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


class Conn:
    """One askbusd socket connection: length-prefixed JSON frames."""

    def __init__(self, sock, hello=None):
        self.s = socket.socket(socket.AF_UNIX)
        self.s.connect(sock)
        self.buf = b""
        if hello:
            self.send(hello)

    def send(self, *frames):
        out = b""
        for frame in frames:
            body = json.dumps(frame).encode()
            out += len(body).to_bytes(4, "big") + body
        self.s.sendall(out)

    def frames(self):
        """The frames already received (reads what the socket has; blocks for at least one)."""
        self.buf += self.s.recv(1 << 20)
        out = []
        while len(self.buf) >= 4:
            n = int.from_bytes(self.buf[:4], "big")
            if len(self.buf) < 4 + n:
                break
            out.append(json.loads(self.buf[4:4 + n]))
            self.buf = self.buf[4 + n:]
        return out


class RawNats:
    """A bare core NATS connection (the text protocol), for the raw fan-out baseline."""

    def __init__(self, port, sub=None):
        self.s = socket.create_connection(("127.0.0.1", port))
        self.s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = b""
        cmd = b'CONNECT {"verbose":false,"pedantic":false}\r\n'
        if sub:
            cmd += b"SUB " + sub.encode() + b" 1\r\n"
        self.s.sendall(cmd + b"PING\r\n")
        while b"PONG\r\n" not in self.buf:
            self.buf += self.s.recv(65536)
        self.buf = self.buf.split(b"PONG\r\n", 1)[1]

    def pub(self, subject, payload):
        self.s.sendall(b"PUB %s %d\r\n%s\r\n" % (subject.encode(), len(payload), payload))

    def msgs(self):
        """How many whole MSGs arrived (reads what the socket has; blocks for at least one)."""
        self.buf += self.s.recv(1 << 20)
        n = 0
        while True:
            if self.buf.startswith(b"PING\r\n"):
                self.s.sendall(b"PONG\r\n")
                self.buf = self.buf[6:]
                continue
            end = self.buf.find(b"\r\n")
            if end < 0 or not self.buf.startswith(b"MSG "):
                return n
            size = int(self.buf[:end].split()[-1])
            if len(self.buf) < end + 2 + size + 2:
                return n
            self.buf = self.buf[end + 2 + size + 2:]
            n += 1


def question(cid, timeout_ms=600000):
    return {"type": "ask-user-request", "correlationId": cid, "timeoutMs": timeout_ms,
            "questions": [{"question": "Deploy the build to staging now? " + "x" * 160,
                           "header": "Deploy", "type": "yesno"}]}


def p50(xs):
    xs = sorted(xs)
    return xs[len(xs) // 2]


def show_latency(nodes, port, k):
    """p50 of a question's show on all other nodes, and of a raw fan-out, in µs."""
    producer = Conn(nodes[0][1], {"type": "hello", "protocol": 1, "client": "fed-scale"})
    uis = [Conn(sock, {"type": "subscribe", "client": "fed-scale-ui"}) for _, sock in nodes[1:]]
    sel = selectors.DefaultSelector()
    for ui in uis:
        sel.register(ui.s, selectors.EVENT_READ, ui)

    def until_all(kind, cid):
        left = set(range(len(uis)))
        while left:
            for key, _ in sel.select(timeout=30):
                ui = key.data
                if any(f.get("type") == kind and f.get("correlationId") == cid
                       for f in ui.frames()):
                    left.discard(uis.index(ui))

    shown = []
    for i in range(k + 10):
        cid = f"show-{i}"
        frame = question(cid)
        t0 = time.perf_counter()
        producer.send(frame)
        until_all("ask-user-request", cid)
        if i >= 10:
            shown.append((time.perf_counter() - t0) * 1e6)
        producer.send({"type": "ask-user-cancel", "correlationId": cid})
        until_all("ask-user-withdrawn", cid)
    sel.close()
    size = len(json.dumps(question("show-0")))
    subs = [RawNats(port, "fanout.bench") for _ in uis]
    pub = RawNats(port)
    sel = selectors.DefaultSelector()
    for sub in subs:
        sel.register(sub.s, selectors.EVENT_READ, sub)
    raw = []
    for i in range(k + 10):
        t0 = time.perf_counter()
        pub.pub("fanout.bench", b"x" * size)
        got = {id(sub): 0 for sub in subs}
        while any(v == 0 for v in got.values()):
            for key, _ in sel.select(timeout=30):
                got[id(key.data)] += key.data.msgs()
        if i >= 10:
            raw.append((time.perf_counter() - t0) * 1e6)
    sel.close()
    return round(p50(shown)), round(p50(raw))


# Questions wait for a UI (none is on their own node), and the limits leave room for the
# reconcile scenario's pending.
NODE_ARGS = ["--no-ui", "wait", "--max-pending", "50000", "--max-pending-per-uid", "50000",
             "--max-pending-per-connection", "50000"]


def start_nats(args, port, mport):
    nats = subprocess.Popen([args.nats, "-a", "127.0.0.1", "-p", str(port), "-m", str(mport)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(400):
        try:
            monitor(mport, "/varz")
            return nats
        except OSError:
            time.sleep(0.01)
    raise RuntimeError("nats-server did not start")


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))


def remote_pending(sock):
    fed = stats(sock).get("federation", {})
    return fed.get("remotePending", -1) if fed.get("connected") else -1


def start_nodes(n, args, tmp, port, nodes):
    """Starts `n` askbusd nodes on the server at `port` (appended to `nodes` as they start, so
    the caller stops them whatever happens) and waits until each sees the n - 1 others."""
    for i in range(n):
        d = os.path.join(tmp, f"n{i}")
        os.makedirs(d)
        env = dict(os.environ, ASKBUS_LOG="warn", ASKBUS_POLICIES="off", XDG_CONFIG_HOME=d)
        p = subprocess.Popen([args.bin, "--socket", f"{d}/s", "--no-store", "--nats",
                              f"nats://127.0.0.1:{port}", "--node", f"n{i}", *NODE_ARGS],
                             env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        nodes.append((p, f"{d}/s"))
    for _, sock in nodes:
        while not os.path.exists(sock):
            time.sleep(0.01)
    for _, sock in nodes:
        while len(stats(sock).get("federation", {}).get("nodes", [])) < n - 1:
            time.sleep(0.05)


def reconcile(n, args):
    """The restart scenario: see the module's doc."""
    tmp = tempfile.mkdtemp(prefix="askbus-reconcile-")
    port, mport = free_port(), free_port()
    nats = start_nats(args, port, mport)
    nodes = []
    try:
        start_nodes(n, args, tmp, port, nodes)
        shower = nodes[1][0].pid
        time.sleep(1)
        rss0 = rss_kib(shower)
        producer = Conn(nodes[0][1], {"type": "hello", "protocol": 1, "client": "fed-scale"})
        total = args.pending
        for at in range(0, total, 500):
            producer.send(*[question(f"r-{i}") for i in range(at, min(total, at + 500))])

        def wait_all(expected, deadline_s):
            t0 = time.monotonic()
            left = [sock for _, sock in nodes[1:]]
            while left:
                left = [sock for sock in left if remote_pending(sock) != expected]
                if time.monotonic() - t0 > deadline_s:
                    raise RuntimeError(f"{len(left)} nodes never showed {expected}")
                if left:
                    time.sleep(0.005)
            return time.monotonic() - t0

        shared_s = wait_all(total, 120)
        time.sleep(1)
        rss1 = rss_kib(shower)
        frame = len(json.dumps(question("r-0000"))) + 100  # + the producer and node fields
        per_q = (rss1 - rss0) * 1024 / total - frame
        c0 = [cpu_ms(p.pid) for p, _ in nodes[1:]]
        time.sleep(args.idle)
        c1 = [cpu_ms(p.pid) for p, _ in nodes[1:]]
        showers_cpu = max((b - a) / args.idle for a, b in zip(c0, c1))
        # The server dies; meanwhile a fifth end on node 0 and a tenth more are asked.
        nats.send_signal(signal.SIGKILL)
        nats.wait()
        while stats(nodes[0][1]).get("federation", {}).get("connected"):
            time.sleep(0.01)
        withdrawn = total // 5
        producer.send(*[{"type": "ask-user-cancel", "correlationId": f"r-{i}"}
                        for i in range(withdrawn)])
        added = total // 10
        producer.send(*[question(f"r-{i}") for i in range(total, total + added)])
        expected = total - withdrawn + added
        while stats(nodes[0][1]).get("pending") != expected:
            time.sleep(0.01)
        nats = start_nats(args, port, mport)
        restarted = time.monotonic()
        reconciled_s = wait_all(expected, 120)
        return {
            "nodes": n,
            "pending": total,
            "shared_s": round(shared_s, 2),
            "shower_rss_per_question_beyond_frame_bytes": round(per_q),
            "showers_idle_cpu_ms_per_s_max": round(showers_cpu, 3),
            "reconciled_after_server_restart_s": round(time.monotonic() - restarted, 2),
            "reconciled_wait_s": round(reconciled_s, 2),
        }
    finally:
        for p, _ in nodes:
            p.terminate()
        for p, _ in nodes:
            p.wait()
        nats.terminate()
        nats.wait()
        shutil.rmtree(tmp, ignore_errors=True)


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
        start_nodes(n, args, tmp, port, nodes)
        formed = time.monotonic() - t0
        time.sleep(1)
        v0 = monitor(mport, "/varz")
        s0, c0 = cpu_ms(nats.pid), [cpu_ms(p.pid) for p, _ in nodes]
        time.sleep(args.idle)
        v1 = monitor(mport, "/varz")
        s1, c1 = cpu_ms(nats.pid), [cpu_ms(p.pid) for p, _ in nodes]
        subs = monitor(mport, "/subsz")["num_subscriptions"] - base
        per_node = [(b - a) / args.idle for a, b in zip(c0, c1)]
        extra = {}
        if args.show:
            ask, raw = show_latency(nodes, port, args.show)
            extra = {"show_p50_us": ask, "raw_fanout_p50_us": raw,
                     "show_vs_raw": round(ask / raw, 2)}
        return extra | {
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
    ap.add_argument("--show", type=int, default=0, metavar="K")
    ap.add_argument("--reconcile", type=int, default=0, metavar="N")
    ap.add_argument("--pending", type=int, default=10000)
    args = ap.parse_args()
    if args.reconcile:
        print(json.dumps(reconcile(args.reconcile, args)))
        return
    rows = [run(int(n), args) for n in args.nodes.split(",")]
    for r in rows:
        print(json.dumps(r))
    xs = [r["nodes"] for r in rows]
    for key in ("server_subscriptions", "server_idle_cpu_ms_per_s", "server_msgs_per_s",
                "node_idle_cpu_ms_per_s_max"):
        print(key, json.dumps(fit(xs, [r[key] for r in rows])))


if __name__ == "__main__":
    main()

"""Driver for bench/gossip/run.sh: starts both clusters, waits for convergence, measures idle cost.

Everything runs inside a fresh network namespace (removed at exit). vigil nodes use 127.0.1.1,
Go nodes 127.0.2.1, one port each from 20000 up; an nftables output chain counts what each
address sends (IP bytes, so UDP and TCP headers and push/pull included, identically for both).
"""

import json
import os
import signal
import subprocess
import sys
import threading
import time

VIGIL_BIN, GO_BIN, N, WINDOW = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
NS = f"vigil-gbench-{os.getpid()}"
HZ = os.sysconf("SC_CLK_TCK")
SETTLE = 10.0
CONVERGE_LIMIT = 180.0
procs = []


def sh(*args, stdin=None):
    subprocess.run(args, check=True, input=stdin, text=True)


def cleanup():
    for p in procs:
        try:
            p.kill()
        except OSError:
            pass
    for p in procs:
        try:
            p.wait(timeout=5)
        except Exception:
            pass
    subprocess.run(["ip", "netns", "del", NS], stderr=subprocess.DEVNULL)


class Node:
    def __init__(self, kind, i, argv):
        self.kind, self.name = kind, f"{kind[0]}{i:03d}"
        self.peers = set()
        self.proc = subprocess.Popen(
            ["ip", "netns", "exec", NS] + argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        procs.append(self.proc)
        threading.Thread(target=self.read, daemon=True).start()

    def read(self):
        for line in self.proc.stdout:
            try:
                ev = json.loads(line)
            except ValueError:
                continue
            node = ev.get("node")
            if not node or node == self.name:
                continue
            if ev.get("event") == "join":
                self.peers.add(node)
            elif ev.get("event") in ("dead", "left"):
                self.peers.discard(node)

    def cpu_ticks(self):
        with open(f"/proc/{self.proc.pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return int(fields[11]) + int(fields[12])  # utime + stime

    def memory(self):
        """RSS, PSS and private (unshared) memory in MiB, from smaps_rollup."""
        kb = {}
        with open(f"/proc/{self.proc.pid}/smaps_rollup") as f:
            for line in f:
                parts = line.split()
                if len(parts) == 3 and parts[2] == "kB":
                    kb[parts[0].rstrip(":")] = int(parts[1])
        private = kb.get("Private_Clean", 0) + kb.get("Private_Dirty", 0)
        return kb["Rss"] / 1024, kb["Pss"] / 1024, private / 1024


def start_cluster(kind):
    nodes = []
    ip = "127.0.1.1" if kind == "vigil" else "127.0.2.1"
    seed = f"{ip}:20000"
    t0 = time.monotonic()
    for i in range(N):
        port = 20000 + i
        name = f"{kind[0]}{i:03d}"
        if kind == "vigil":
            argv = [VIGIL_BIN] + (["agent"] if os.path.basename(VIGIL_BIN) == "vigil" else [])
            argv += ["--name", name, "--bind", f"{ip}:{port}", "--profile", "lan"]
            if i:
                argv += ["--seed", seed]
        else:
            argv = [GO_BIN, "-name", name, "-bind", ip, "-advertise", ip, "-port", str(port), "-profile", "lan"]
            if i:
                argv += ["-seeds", seed]
        nodes.append(Node(kind, i, argv))
        if i == 0:
            time.sleep(0.3)  # let the seed bind before the others dial it
    launched = time.monotonic()
    while any(len(n.peers) < N - 1 for n in nodes):
        if time.monotonic() - launched > CONVERGE_LIMIT:
            worst = min(len(n.peers) for n in nodes)
            raise SystemExit(f"{kind}: no convergence after {CONVERGE_LIMIT}s (worst node sees {worst + 1})")
        time.sleep(0.05)
    done = time.monotonic()
    return nodes, launched - t0, done - launched


def nft_counters():
    out = subprocess.run(["ip", "netns", "exec", NS, "nft", "-j", "list", "counters"],
                         check=True, capture_output=True, text=True).stdout
    res = {}
    for item in json.loads(out)["nftables"]:
        c = item.get("counter")
        if c:
            res[c["name"]] = (c["bytes"], c["packets"])
    return res


def mean(xs):
    return sum(xs) / len(xs)


def main():
    sh("ip", "netns", "add", NS)
    sh("ip", "-n", NS, "link", "set", "lo", "up")
    sh("ip", "netns", "exec", NS, "nft", "-f", "-", stdin="""
table inet gbench {
  counter vigil {}
  counter go {}
  chain out {
    type filter hook output priority 0;
    ip saddr 127.0.1.1 counter name vigil
    ip saddr 127.0.2.1 counter name go
  }
}
""")
    go_nodes, go_launch, go_conv = start_cluster("go")
    vigil_nodes, vigil_launch, vigil_conv = start_cluster("vigil")
    time.sleep(SETTLE)
    everyone = go_nodes + vigil_nodes
    t0, ticks0, c0 = time.monotonic(), {id(n): n.cpu_ticks() for n in everyone}, nft_counters()
    time.sleep(WINDOW)
    t1, ticks1, c1 = time.monotonic(), {id(n): n.cpu_ticks() for n in everyone}, nft_counters()
    dt = t1 - t0
    lost = [n.name for n in everyone if len(n.peers) < N - 1]

    def stats(nodes, counter, launch, conv):
        cpu = [100.0 * (ticks1[id(n)] - ticks0[id(n)]) / HZ / dt for n in nodes]
        mem = [n.memory() for n in nodes]
        rss = [m[0] for m in mem]
        b = (c1[counter][0] - c0[counter][0]) / dt / len(nodes)
        p = (c1[counter][1] - c0[counter][1]) / dt / len(nodes)
        return {"launch": launch, "conv": conv, "cpu": mean(cpu), "cpu_max": max(cpu),
                "rss": mean(rss), "rss_max": max(rss), "pss": mean([m[1] for m in mem]),
                "private": mean([m[2] for m in mem]), "bps": b, "pps": p}

    v = stats(vigil_nodes, "vigil", vigil_launch, vigil_conv)
    g = stats(go_nodes, "go", go_launch, go_conv)
    kernel = os.uname().release
    print(f"{N} vigil agents + {N} Go memberlist 0.2.2 nodes, LAN profile, loopback in a netns; "
          f"idle window {dt:.0f} s after {SETTLE:.0f} s settle; kernel {kernel}, {os.cpu_count()} cores, "
          f"{time.strftime('%Y-%m-%d', time.gmtime())}")
    print()
    print("| measure | vigil agent | Go memberlist | vigil/Go |")
    print("|---|---:|---:|---:|")
    rows = [
        ("launch all nodes (s)", "launch", "{:.1f}"),
        ("converge after last launch (s)", "conv", "{:.2f}"),
        ("idle CPU per node, mean (%)", "cpu", "{:.2f}"),
        ("idle CPU per node, max (%)", "cpu_max", "{:.2f}"),
        ("RSS per node, mean (MiB)", "rss", "{:.1f}"),
        ("RSS per node, max (MiB)", "rss_max", "{:.1f}"),
        ("PSS per node, mean (MiB)", "pss", "{:.2f}"),
        ("private memory per node, mean (MiB)", "private", "{:.2f}"),
        ("bytes/s sent per node (IP)", "bps", "{:.0f}"),
        ("packets/s sent per node", "pps", "{:.1f}"),
    ]
    for label, key, fmt in rows:
        ratio = v[key] / g[key] if g[key] else float("nan")
        print(f"| {label} | {fmt.format(v[key])} | {fmt.format(g[key])} | {ratio:.2f} |")
    if lost:
        print(f"\nnodes that lost members during the window: {', '.join(lost)}")


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    try:
        main()
    finally:
        cleanup()

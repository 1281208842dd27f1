"""What a `fast` speaker costs when nothing happens: CPU and wake-ups per thread.

Five hosts (bench/failover/lab.py), `vigil standalone` (profile fast, or PROFILE; one VIP) on each,
optionally LOSS_PERCENT random loss on every host (as the soak) and a client asking the VIP
every CLIENT_MS milliseconds (0: no client). After the cluster has settled, every vigil's
threads are sampled from /proc for DURATION seconds: CPU (user + system) and context switches
(voluntary: it slept and was woken; involuntary: preempted), per second, by thread name. The
owner of the VIP is shown apart, since the watch and the client's questions land on it.
Then the owner is sampled every 100 ms (the CFS bandwidth period the soak's quota is counted
in) for the same time: how much CPU each 100 ms took, all threads together and the thread that
took most, as a distribution, and how many periods went over 2 ms (the soak's hardest quota).

    sudo python3 bench/soak/cpu.py target/release
    sudo LOSS_PERCENT=5 CLIENT_MS=10 DURATION=60 python3 bench/soak/cpu.py target/release
    sudo PROFILE=lan python3 bench/soak/cpu.py target/release

Needs nothing else running: the figures are CPU time, which a busy machine inflates.
"""

import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "failover"))
import lab as L  # noqa: E402
import soak as S  # noqa: E402

PERIOD = 0.1


def threads(pid):
    """{thread name: (cpu seconds, voluntary switches, involuntary switches)}, summed by name."""
    out = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            name = open(f"/proc/{pid}/task/{tid}/comm").read().strip()
            # schedstat's first field: nanoseconds on a CPU (stat's ticks are 10 ms coarse).
            cpu = int(open(f"/proc/{pid}/task/{tid}/schedstat").read().split()[0]) / 1e9
            status = dict(line.split(":", 1) for line in open(f"/proc/{pid}/task/{tid}/status"))
            vol = int(status["voluntary_ctxt_switches"])
            invol = int(status["nonvoluntary_ctxt_switches"])
        except (OSError, ValueError, KeyError):
            continue
        c, v, i = out.get(name, (0.0, 0, 0))
        out[name] = (c + cpu, v + vol, i + invol)
    return out


def packets(lab, host):
    """(gossip datagrams received, sent) so far, from the speaker's /metrics."""
    got = {}
    for line in lab.metrics(host).splitlines():
        for key in ("vigil_gossip_packets_received", "vigil_gossip_packets_sent"):
            if line.startswith(key + " ") or line.startswith(key + "_total "):
                got[key] = float(line.split()[-1])
    return (got.get("vigil_gossip_packets_received", 0.0),
            got.get("vigil_gossip_packets_sent", 0.0))


def main():
    bin_dir = sys.argv[1]
    duration = int(os.environ.get("DURATION", "30"))
    loss = int(os.environ.get("LOSS_PERCENT", "0"))
    client_ms = int(os.environ.get("CLIENT_MS", "0"))
    profile = os.environ.get("PROFILE", "fast")
    lab = L.Lab(5, bin_dir, tag="vgcp")
    lab.close_on_signals()
    try:
        lab.build()
        for h in lab.hosts():
            lab.start_vigil(h, profile)

        def owner():
            views = [lab.vigil_view(h) for h in lab.hosts()]
            if any(v is None or len(v[0]) != lab.nodes for v in views):
                return None
            owners = {v[1] for v in views}
            return owners.pop() if len(owners) == 1 else None

        vip_owner = L.wait_until(60, 0.3, owner)
        if vip_owner is None:
            raise SystemExit("cpu: vigil did not settle within 60 s")
        if loss:
            for h in lab.hosts():
                S.add_loss(lab, h, loss)
        client = None
        if client_ms:
            client = lab.watch(L.VIGIL_VIP, (duration + 5) * 1000, interval_ms=client_ms)
        time.sleep(3)
        pids = {h: lab.procs[f"vigil-{h}"].pid for h in lab.hosts()}
        sent_before = {h: packets(lab, h) for h in lab.hosts()}
        before = {h: threads(p) for h, p in pids.items()}
        start = time.monotonic()
        time.sleep(duration)
        elapsed = time.monotonic() - start
        after = {h: threads(p) for h, p in pids.items()}
        sent_after = {h: packets(lab, h) for h in lab.hosts()}
        periods = per_period(pids[vip_owner], duration)
        if client is not None:
            client.kill()
            client.wait()

        log = L.log
        log(f"{duration} s, profile {profile}, {loss}% loss, client every {client_ms or '-'} ms; owner {vip_owner}")
        print(f"{'host':6} {'thread':16} {'CPU ms/s':>9} {'woken/s':>8} {'preempted/s':>12}")
        for h in lab.hosts():
            total = [0.0, 0.0, 0.0]
            for name in sorted(after[h]):
                c1, v1, i1 = after[h][name]
                c0, v0, i0 = before[h].get(name, (0.0, 0, 0))
                row = ((c1 - c0) * 1000 / elapsed, (v1 - v0) / elapsed, (i1 - i0) / elapsed)
                total = [t + r for t, r in zip(total, row)]
                if row[0] >= 0.05 or row[1] >= 0.5:
                    print(f"{h:6} {name:16} {row[0]:9.2f} {row[1]:8.1f} {row[2]:12.1f}")
            mark = "  (owner)" if h == vip_owner else ""
            rx, tx = (round((a - b) / elapsed) for a, b in zip(sent_after[h], sent_before[h]))
            print(f"{h:6} {'all':16} {total[0]:9.2f} {total[1]:8.1f} {total[2]:12.1f}"
                  f"   gossip datagrams in/out per s: {rx} / {tx}{mark}")
        print_periods(periods)
    finally:
        lab.close()


def per_period(pid, duration):
    """CPU per 100 ms of the process, [(total ms, {thread: ms})], for `duration` seconds."""
    out = []
    last = threads(pid)
    tick = time.monotonic()
    for _ in range(int(duration / PERIOD)):
        tick += PERIOD
        time.sleep(max(0.0, tick - time.monotonic()))
        now = threads(pid)
        used = {n: (now[n][0] - last.get(n, (0.0, 0, 0))[0]) * 1000 for n in now}
        out.append((sum(used.values()), used))
        last = now
    return out


def print_periods(periods):
    totals = [p[0] for p in periods]
    over = [p for p in periods if p[0] > 2.0]
    p50, p90, p99 = (L.percentile(totals, q) for q in (50, 90, 99))
    print(f"owner, CPU per 100 ms over {len(periods)} periods: p50 {p50:.2f} ms, "
          f"p90 {p90:.2f}, p99 {p99:.2f}, max {max(totals):.2f}; over 2 ms: {len(over)}")
    heavy = {}
    for _, used in over:
        name = max(used, key=used.get)
        heavy[name] = heavy.get(name, 0) + 1
    if heavy:
        print("  the thread that took most in those periods: "
              + ", ".join(f"{n} {c}" for n, c in sorted(heavy.items(), key=lambda x: -x[1])))
    for total, used in sorted(over, key=lambda p: -p[0])[:5]:
        parts = ", ".join(f"{n} {ms:.2f}" for n, ms in sorted(used.items(), key=lambda x: -x[1])
                          if ms >= 0.05)
        print(f"  {total:.2f} ms: {parts}")


if __name__ == "__main__":
    main()

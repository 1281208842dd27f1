"""The soak (run by bench/soak/run.sh as root; see README.md there).

Five hosts and a client (bench/failover/lab.py). On every host: `vigil standalone` (profile
fast, VIP 198.18.8.100) and keepalived (VRRPv3, advert_int KA_ADVERT seconds, default 0.1, VIP
198.18.8.102; 198.18.8.103 for another interval, e.g. 0.01, keepalived's floor), at the same
time. Every host's namespace drops 5% of its IP packets at random, in and out (nftables
`numgen random mod 100 < 5 drop` on the input and output hooks; ARP and the speakers' packet
sockets are below netfilter, so the loss hits gossip and VRRP adverts, which is what failure
detection runs on). One host, the one that owns both VIPs, has its speaker and keepalived in a
CPU cgroup with a small quota (CFS bandwidth: QUOTA_US per 100 ms period): they run in short
bursts and are stalled for the rest of each period, as on an overloaded machine.

Nobody is killed, so every change of the MAC answering a VIP is a false failover. The client
watches both VIPs for DURATION seconds (ARP + ICMP every 10 ms). Counted: answering-MAC changes
and probe rounds answered by two MACs (from the watch), vigil's member_suspect / member_failed
log events and gossip counters (/metrics), keepalived's state changes (its logs).
"""

import json
import os
import re
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "failover"))
import lab as L  # noqa: E402


log = L.log


class CpuLimit:
    """A CPU cgroup with a CFS quota (v2 `cpu.max` where the cpu controller is on the unified
    hierarchy, else v1 `cpu.cfs_quota_us`)."""

    def __init__(self, name, quota_us, period_us=100_000):
        v2 = "/sys/fs/cgroup/cgroup.controllers"
        if os.path.exists(v2) and "cpu" in open(v2).read().split():
            self.path = f"/sys/fs/cgroup/{name}"
            os.mkdir(self.path)
            with open(f"{self.path}/cpu.max", "w") as f:
                f.write(f"{quota_us} {period_us}")
            self.kind = "cgroup v2 cpu.max"
        else:
            self.path = f"/sys/fs/cgroup/cpu/{name}"
            os.mkdir(self.path)
            with open(f"{self.path}/cpu.cfs_period_us", "w") as f:
                f.write(str(period_us))
            with open(f"{self.path}/cpu.cfs_quota_us", "w") as f:
                f.write(str(quota_us))
            self.kind = "cgroup v1 cpu.cfs_quota_us"
        self.desc = f"{quota_us} us per {period_us} us ({self.kind})"

    def add(self, pid):
        with open(f"{self.path}/cgroup.procs", "w") as f:
            f.write(str(pid))

    def throttled(self):
        try:
            stat = dict(line.split() for line in open(f"{self.path}/cpu.stat"))
            return {k: int(v) for k, v in stat.items()}
        except OSError:
            return {}

    def remove(self):
        # Move anything left back to the root group, then delete ours.
        root = os.path.dirname(self.path)
        try:
            for pid in open(f"{self.path}/cgroup.procs").read().split():
                try:
                    with open(f"{root}/cgroup.procs", "w") as f:
                        f.write(pid)
                except OSError:
                    pass
        except OSError:
            pass
        # Killed members leave the group only once reaped: retry for a moment.
        for _ in range(50):
            try:
                os.rmdir(self.path)
                return
            except FileNotFoundError:
                return
            except OSError:
                time.sleep(0.1)
        print(f"soak: could not remove {self.path}", file=sys.stderr)


def add_loss(lab, host, percent):
    rules = (
        "table inet soak {\n"
        "  chain input { type filter hook input priority 0; policy accept;"
        f" numgen random mod 100 < {percent} counter drop; }}\n"
        "  chain output { type filter hook output priority 0; policy accept;"
        f" numgen random mod 100 < {percent} counter drop; }}\n"
        "}\n")
    path = lab.path(f"nft-{host}.conf")
    with open(path, "w") as f:
        f.write(rules)
    L.run(["ip", "netns", "exec", lab.ns(host), "nft", "-f", path])


def dropped(lab, host):
    out = L.run(["ip", "netns", "exec", lab.ns(host), "nft", "list", "table", "inet", "soak"],
                check=False).stdout
    return sum(int(n) for n in re.findall(r"counter packets (\d+)", out))


def all_pids(lab, key):
    """The PID of the process started as `key` (ip netns exec has become the program)."""
    proc = lab.procs[key]
    return [proc.pid]


def main():
    bin_dir = sys.argv[1]
    duration = int(os.environ.get("DURATION", "600"))
    loss = int(os.environ.get("LOSS_PERCENT", "5"))
    quota = int(os.environ.get("QUOTA_US", "10000"))
    advert = os.environ.get("KA_ADVERT", "0.1")
    if advert == "1":
        raise SystemExit("soak: KA_ADVERT must be below 1 s (VRRPv3, e.g. 0.1 or 0.01)")
    ka_vip = L.keepalived_instance(advert)[0]
    ka = L.keepalived_tag(advert)
    ka_name = f"keepalived_{advert}"
    results = os.environ.get("RESULTS", "")
    lab = L.Lab(5, bin_dir, tag="vgsk")
    limits = {}

    def remove_limits():
        for limit in limits.values():
            limit.remove()

    lab.close_on_signals(also=remove_limits)
    try:
        lab.build()
        log("vigil standalone (fast) on every host")
        for h in lab.hosts():
            lab.start_vigil(h)

        def vigil_owner():
            owners = set()
            for h in lab.hosts():
                view = lab.vigil_view(h)
                if view is None or len(view[0]) != lab.nodes or view[1] is None:
                    return None
                owners.add(view[1])
            return owners.pop() if len(owners) == 1 else None

        owner = L.wait_until(60, 0.3, vigil_owner)
        if owner is None:
            raise SystemExit("soak: vigil did not settle within 60 s")
        # keepalived's master is the same host: the starved one owns both VIPs.
        order = [owner] + [h for h in lab.hosts() if h != owner]
        log(f"vigil owner {owner}; keepalived (advert {advert} s) with {owner} as master")
        for rank, h in enumerate(order):
            conf = lab.path(f"{ka}-{h}.conf")
            text = lab.keepalived_config(h, advert)
            text = re.sub(r"priority \d+", f"priority {150 - 10 * rank}", text)
            with open(conf, "w") as f:
                f.write(text)
            lab.spawn(f"{ka}-{h}", h,
                      ["keepalived", "-n", "-l", "-D", "-G", "-P", "-f", conf,
                       "-p", lab.path(f"{ka}-{h}.pid"), "-r", lab.path(f"{ka}-{h}.vrrp.pid")],
                      f"{ka}-{h}.log")

        def ka_settled():
            holders = [h for h in lab.hosts() if f" {ka_vip}/" in lab.addresses(h)]
            return holders == [owner] and lab.arp_answers(ka_vip) == [lab.macs[owner]]

        if not L.wait_until(60, 0.3, ka_settled):
            raise SystemExit("soak: keepalived did not settle within 60 s")
        if lab.arp_answers(L.VIGIL_VIP) != [lab.macs[owner]]:
            raise SystemExit("soak: the vigil VIP is not answered by its owner alone")

        for h in lab.hosts():
            add_loss(lab, h, loss)
        # One cgroup per system, each with the whole quota: in a shared one, keepalived at
        # 0.01 s adverts ate most of the quota and starved vigil far harder than asked.
        starved = {"vigil": [lab.procs[f"vigil-{owner}"].pid],
                   "keepalived": lab.keepalived_pids(owner, advert)}
        for system, pids in starved.items():
            limits[system] = CpuLimit(f"{lab.prefix}-starved-{system}", quota)
            for pid in pids:
                limits[system].add(pid)
        log(f"{loss}% loss in and out on every host; {owner}'s vigil and keepalived "
            f"(pids {starved}) each limited to {limits['vigil'].desc}")
        metrics_before = {h: lab.metrics(h) for h in lab.hosts()}
        log_sizes = {h: os.path.getsize(lab.path(f"vigil-{h}.log")) for h in lab.hosts()}
        ka_sizes = {h: os.path.getsize(lab.path(f"{ka}-{h}.log")) for h in lab.hosts()}

        log(f"watching both VIPs for {duration} s")
        watches = {vip: lab.watch(vip, duration * 1000, interval_ms=10, extra=["--gap-ms", "100"])
                   for vip in (L.VIGIL_VIP, ka_vip)}
        outs = {}
        for vip, w in watches.items():
            out, err = w.communicate(timeout=duration + 60)
            outs[vip] = out
            if w.returncode != 0:
                raise SystemExit(f"soak: watch of {vip} failed: {err}")
        throttle = {system: limit.throttled() for system, limit in limits.items()}

        # -- counting --
        report = {"duration_s": duration, "loss_percent": loss, "starved_host": owner,
                  "keepalived_advert_s": advert,
                  "cpu_limit": limits["vigil"].desc, "cpu_stat": throttle}
        for vip, name in ((L.VIGIL_VIP, "vigil"), (ka_vip, ka_name)):
            parsed = L.parse_watch(outs[vip])
            changes = [e for e in parsed["events"] if e.startswith("mac-change") and "kind=arp" in e]
            report[name] = {
                "arp": parsed["arp"], "icmp": parsed["icmp"],
                "arp_mac_changes": int(parsed["arp"]["mac_changes"]),
                "arp_conflict_rounds": int(parsed["arp"]["conflicts"]),
                "arp_outages_over_100ms": int(parsed["arp"]["outages"]),
                "icmp_outages_over_100ms": int(parsed["icmp"]["outages"]),
                "first_changes": changes[:10],
            }
        suspects, failed = [], []
        for h in lab.hosts():
            with open(lab.path(f"vigil-{h}.log")) as f:
                f.seek(log_sizes[h])
                for line in f:
                    try:
                        e = json.loads(line)
                    except ValueError:
                        continue
                    ev = e.get("event") or e.get("fields", {}).get("event")
                    if ev == "member_suspect":
                        suspects.append((h, line.strip()))
                    elif ev == "member_failed":
                        failed.append((h, line.strip()))
        report["vigil_member_suspect_events"] = len(suspects)
        report["vigil_member_failed_events"] = len(failed)
        report["vigil_suspect_examples"] = [s[1] for s in suspects[:5]]
        counters = {}
        pattern = re.compile(r"^(vigil_gossip_(?:suspicions|deaths_declared|probes_failed|probes)"
                             r"_total|vigil_election_vips_taken_total|vigil_gossip_member_events_total)"
                             r"(\{[^}]*\})? (\d+)", re.M)
        for h in lab.hosts():
            before = {(m[0], m[1]): int(m[2]) for m in pattern.findall(metrics_before[h])}
            for m in pattern.findall(lab.metrics(h)):
                key = m[0] + m[1]
                counters[key] = counters.get(key, 0) + int(m[2]) - before.get((m[0], m[1]), 0)
        report["vigil_metrics_delta_all_hosts"] = counters
        transitions = {}
        for h in lab.hosts():
            with open(lab.path(f"{ka}-{h}.log")) as f:
                f.seek(ka_sizes[h])
                text = f.read()
            transitions[h] = {"MASTER": text.count("Entering MASTER STATE"),
                              "BACKUP": text.count("Entering BACKUP STATE")}
        report["keepalived_state_changes"] = transitions
        report["packets_dropped_by_nft"] = {h: dropped(lab, h) for h in lab.hosts()}
        print(json.dumps(report, indent=1))
        v, k = report["vigil"], report[ka_name]
        print(f"\nfalse failovers (ARP answering-MAC changes) in {duration} s: "
              f"vigil {v['arp_mac_changes']}, keepalived {advert} s {k['arp_mac_changes']}")
        print(f"probe rounds answered by two MACs: vigil {v['arp_conflict_rounds']}, "
              f"keepalived {k['arp_conflict_rounds']}")
        print(f"ARP outages > 100 ms: vigil {v['arp_outages_over_100ms']}, keepalived "
              f"{k['arp_outages_over_100ms']}; ICMP outages > 100 ms: vigil "
              f"{v['icmp_outages_over_100ms']}, keepalived {k['icmp_outages_over_100ms']}")
        print(f"vigil gossip: {len(suspects)} member_suspect and {len(failed)} member_failed log "
              f"events; keepalived MASTER entries {sum(t['MASTER'] for t in transitions.values())}")
        if results:
            with open(results, "w") as f:
                json.dump(report, f, indent=1)
    finally:
        lab.close()
        for limit in limits.values():
            limit.remove()


if __name__ == "__main__":
    main()

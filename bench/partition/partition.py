"""Partition and heal schedules (run by bench/partition/run.sh as root; see README.md there).

The failover benchmark's lab (../failover/lab.py): a bridge in its own namespace, a client
198.18.8.2 and hosts h1..h5 (198.18.8.11-15), each running `vigil standalone` (profile fast)
with six services of one VIP each (198.18.8.120-125), so that several hosts own something.

Two kinds of schedule, each run without and with the majority guard
(`election.expected_members: 5`; the isolation rule of a host that loses every peer at once is
always on):

  random  SCHEDULES (seeded, printed) splits of the five hosts into a side A of one or two hosts
          and the rest, cut for 0.3-3 s, then healed. The cut is either `link` (side A's ports
          go down in the bridge: those hosts lose the LAN, the client included, and each other)
          or `nft` (every host drops IP from and to the other side in its own namespace: gossip
          is split, ARP still flows, so the client hears both sides).
  cut     CUT trials: the link of one VIP owner (the owners taken in turn) down for 2 s, then up.

In each schedule the client asks ARP for every VIP every 5 ms (`vigil-l2-client watch`, one
per VIP, each question from its own sender address so that each answer names its question),
from 0.5 s before the cut to POST_MS after the heal, and records which MACs answered each
question and every gratuitous announcement. The rightful owner of a VIP is the owner all five
hosts agreed on before the cut (the election is a function of the member set, so it is the
owner again once the five have merged).

Per schedule, over its VIPs: the longest window in which two MACs answered one VIP (runs of
doubly answered questions, gaps of up to 20 ms joined), during the cut and touching the time
after the heal; in each doubly answered question after the heal, whether the MAC that answered
last (what a client's ARP cache keeps) is the rightful owner's; the time from the heal to the
rightful owner's first gratuitous announcement, for each VIP the schedule disturbed (some
question from the cut on answered by another MAC); any VIP whose questions went unanswered for
more than 100 ms (during the cut: the failover itself; after the heal: a gap the heal made);
the time from the heal until the rightful owner alone answers (to the end of the watch).

Prints the schedules as they run, then a Markdown summary; RESULTS=file.json gets everything.
"""

import itertools
import json
import os
import random
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "failover"))
import lab as L  # noqa: E402

VIPS = [f"{L.SUBNET}.{n}" for n in range(120, 126)]
INTERVAL_MS = 5
PRE_MS = 500
# Questions with two MACs at most this far apart (4 questions) belong to one window.
JOIN_MS = 20
SILENCE_MS = 100
# The watch's senders: 198.18.9.1 upwards (762 addresses, .0 and .255 skipped), never a host's.
SENDER_FIRST = "198.18.9.1"
SENDER_COUNT = 762
NFT_TABLE = "vgpart"


def all_at_once(commands, check=True):
    """Runs one command per host side by side: a firewall split is one event in the network,
    and five `nft` processes one after the other (10-20 ms each) would spread its start and
    its heal over up to 100 ms of what the figures count as the split's."""
    procs = [subprocess.Popen(c, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, text=True) for c in commands]
    for c, p in zip(commands, procs):
        _, err = p.communicate()
        if check and p.returncode != 0:
            raise RuntimeError(f"{' '.join(c)}: {err.strip()}")


class Skipped(Exception):
    """A schedule that could not start: the cluster did not settle (its speakers restarted)."""


log = L.log
percentile = L.percentile


class Partitions:
    def __init__(self, lab, post_ms):
        self.lab = lab
        self.post_ms = post_ms

    # -- vigil ------------------------------------------------------------------------
    def config(self, host, guard):
        i = int(host[1:])
        seeds = ", ".join(L.host_ip(j) for j in range(1, self.lab.nodes + 1))
        services = "".join(f"  - name: s{k}\n    vips: [{vip}]\n" for k, vip in enumerate(VIPS))
        election = f"election: {{expected_members: {self.lab.nodes}}}\n" if guard else ""
        return (f"node: {{name: {host}}}\n"
                f"gossip: {{bind: \"{L.host_ip(i)}:7946\", seeds: [{seeds}], "
                f"profile: fast, keyring_file: {self.lab.path('keyring.json')}}}\n"
                "interfaces: {include: [eth0]}\n"
                "http: {listen: \"127.0.0.1:7472\"}\n"
                f"{election}services:\n{services}")

    def start(self, guard):
        for h in self.lab.hosts():
            conf = self.lab.path(f"vigil-{h}.yaml")
            with open(conf, "w") as f:
                f.write(self.config(h, guard))
            self.lab.spawn(f"vigil-{h}", h,
                           [f"{self.lab.bin}/vigil", "standalone", "--config", conf,
                            "--log-level", "info"], f"vigil-{h}.log")

    def stop(self):
        for h in self.lab.hosts():
            self.lab.stop(f"vigil-{h}", signal.SIGTERM)

    def owners(self):
        """{vip: owner} when every host sees all five alive and names the same owner for
        every VIP, else None."""
        agreed = None
        for h in self.lab.hosts():
            status = self.lab.vigil_status(h)
            if status is None:
                return None
            alive = [m for m in status.get("members", []) if m.get("state") == "alive"]
            if len(alive) != self.lab.nodes:
                return None
            seen = {v.get("vip"): v.get("owner") for v in status.get("vips", [])}
            view = {vip: seen.get(vip) for vip in VIPS}
            if None in view.values() or (agreed is not None and view != agreed):
                return None
            agreed = view
        return agreed

    def settled(self, limit=60.0):
        """The owners, once agreed twice 0.3 s apart and each VIP answered by its owner alone."""
        end = time.monotonic() + limit
        while time.monotonic() < end:
            first = self.owners()
            if first:
                time.sleep(0.3)
                if self.owners() == first and all(
                        self.lab.arp_answers(vip, wait_ms=60) == [self.lab.macs[first[vip]]]
                        for vip in VIPS):
                    return first
            time.sleep(0.2)
        return None

    def settled_or_restart(self, guard):
        """The settled owners; else every cut undone and the speakers restarted, and Skipped
        (one stuck schedule must not end a 35-minute run)."""
        owners = self.settled()
        if owners is not None:
            return owners
        log("the cluster did not settle within 60 s: undoing every cut, restarting the speakers")
        for h in self.lab.hosts():
            self.lab.link(h, True)
        self.heal([], "nft")
        self.stop()
        self.start(guard)
        raise Skipped()

    # -- cuts -------------------------------------------------------------------------
    def cut(self, side, method):
        if method == "link":
            for h in side:
                self.lab.link(h, False)
            return
        other = [h for h in self.lab.hosts() if h not in side]
        for mine, theirs in ((side, other), (other, side)):
            addrs = ", ".join(L.host_ip(int(h[1:])) for h in theirs)
            rules = (f"table inet {NFT_TABLE} {{\n"
                     "  chain input { type filter hook input priority 0; policy accept;"
                     f" ip saddr {{ {addrs} }} drop; }}\n"
                     "  chain output { type filter hook output priority 0; policy accept;"
                     f" ip daddr {{ {addrs} }} drop; }}\n"
                     "}\n")
            for h in mine:
                path = self.lab.path(f"nft-{h}.conf")
                with open(path, "w") as f:
                    f.write(rules)
        all_at_once([["ip", "netns", "exec", self.lab.ns(h), "nft", "-f",
                      self.lab.path(f"nft-{h}.conf")] for h in self.lab.hosts()])

    def heal(self, side, method):
        if method == "link":
            for h in side:
                self.lab.link(h, True)
            return
        all_at_once([["ip", "netns", "exec", self.lab.ns(h), "nft", "delete", "table", "inet",
                      NFT_TABLE] for h in self.lab.hosts()], check=False)

    # -- the client -------------------------------------------------------------------
    def start_watches(self, duration_ms):
        """One watch per VIP; returns [(vip, Popen, output path, offset)] where offset is the
        monotonic time of the watch's t_ms=0 (read off its first round lines: the smallest
        `seen - t_ms` over the first 100 ms, so late reads never shift it)."""
        watches = []
        for k, vip in enumerate(VIPS):
            path = self.lab.path(f"watch-{k}.out")
            out = open(path, "w")
            args = ["ip", "netns", "exec", self.lab.ns("c"), f"{self.lab.bin}/vigil-l2-client",
                    "watch", "--iface", "eth0", "--src-ip", L.CLIENT_IP, "--target", vip,
                    "--interval-ms", str(INTERVAL_MS), "--duration-ms", str(duration_ms),
                    "--sender-first", SENDER_FIRST, "--sender-count", str(SENDER_COUNT),
                    "--linger-ms", "200", "--gap-ms", str(SILENCE_MS), "--rounds", "--answers"]
            proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=out,
                                    stderr=subprocess.PIPE, text=True)
            out.close()
            watches.append([vip, proc, path, None])
        end = time.monotonic() + 2.0
        first_seen = {}
        while time.monotonic() < end:
            now = time.monotonic()
            for w in watches:
                t = last_round_ms(w[2])
                if t is None:
                    continue
                first_seen.setdefault(w[2], now)
                if now - first_seen[w[2]] <= 0.1:
                    offset = now - t / 1000
                    w[3] = offset if w[3] is None else min(w[3], offset)
            if all(w[2] in first_seen and time.monotonic() - first_seen[w[2]] > 0.1
                   for w in watches):
                break
            time.sleep(0.001)
        if any(w[3] is None for w in watches):
            raise RuntimeError("a watch printed no round within 2 s")
        return watches

    def schedule(self, kind, number, side, method, cut_ms, guard):
        owners = self.settled_or_restart(guard)
        duration = PRE_MS + cut_ms + self.post_ms
        watches = self.start_watches(duration)
        start = min(w[3] for w in watches)
        time.sleep(max(0.0, start + PRE_MS / 1000 - time.monotonic()))
        cut_at = time.monotonic()
        self.cut(side, method)
        cut_took = time.monotonic() - cut_at
        time.sleep(max(0.0, cut_at + cut_ms / 1000 - time.monotonic()))
        heal_at = time.monotonic()
        self.heal(side, method)
        heal_took = time.monotonic() - heal_at
        per_vip = {}
        for vip, proc, path, offset in watches:
            try:
                _, err = proc.communicate(timeout=duration / 1000 + 15)
            except subprocess.TimeoutExpired:
                proc.kill()
                _, err = proc.communicate()
            if proc.returncode != 0:
                raise RuntimeError(f"watch of {vip} failed: {err.strip()}")
            with open(path) as f:
                text = f.read()
            record = parse(text)
            per_vip[vip] = analyse(record, self.lab.macs[owners[vip]],
                                   1000 * (cut_at - offset), 1000 * (heal_at - offset),
                                   1000 * (heal_at + heal_took - offset),
                                   {m: h for h, m in self.lab.macs.items()})
            per_vip[vip]["rightful"] = owners[vip]
        result = summarise(kind, number, side, method, cut_ms, guard, owners, per_vip)
        # Cutting and healing take one command per host: times count from the start of the first.
        result["cut_took_ms"] = round(1000 * cut_took)
        result["heal_took_ms"] = round(1000 * heal_took)
        log(line(result))
        return result


def last_round_ms(path):
    """t_ms of the last complete `round` line in a watch's output, if any."""
    try:
        with open(path) as f:
            text = f.read()
    except OSError:
        return None
    for ln in reversed(text.splitlines()[:-1] if not text.endswith("\n") else text.splitlines()):
        if ln.startswith("round "):
            return float(L.fields(ln)["t_ms"])
    return None


def parse(text):
    """Rounds {n: t_ms}, answers {n: [mac in arrival order]}, gratuitous [(t_ms, mac)]."""
    rounds, answers, gratuitous = {}, {}, []
    for ln in text.splitlines():
        if ln.startswith("round "):
            f = L.fields(ln)
            rounds[int(f["n"])] = float(f["t_ms"])
        elif ln.startswith("answer "):
            f = L.fields(ln)
            if f["kind"] != "arp":
                continue
            if f["gratuitous"] == "1":
                gratuitous.append((float(f["t_ms"]), f["mac"]))
            else:
                answers.setdefault(int(f["round"]), []).append(f["mac"])
    return {"rounds": rounds, "answers": answers, "gratuitous": gratuitous}


def analyse(record, rightful, cut_t, heal_t, healed_t, hosts):
    """One VIP's figures in one schedule (times in ms since the cut or the heal). `heal_t` is
    when the heal began, `healed_t` when its last command returned (an nftables heal is five
    `nft` processes, 25-40 ms from the first start to the last exit: until then some hosts
    cannot hear each other yet)."""
    rounds = sorted(record["rounds"].items())
    answers = record["answers"]
    doubles = [(n, t) for n, t in rounds if len(set(answers.get(n, []))) > 1]
    # Windows: runs of doubly answered questions, JOIN_MS apart at most.
    windows = []
    for n, t in doubles:
        if windows and t - windows[-1][1] <= JOIN_MS:
            windows[-1][1] = t
        else:
            windows.append([t, t])
    # A window across the heal counts in both, each for its own part.
    during = [min(b + INTERVAL_MS, heal_t) - max(a, cut_t) for a, b in windows
              if a < heal_t and b >= cut_t]
    after = [b + INTERVAL_MS - max(a, heal_t) for a, b in windows if b >= heal_t]
    after_healed = [b + INTERVAL_MS - max(a, healed_t) for a, b in windows if b >= healed_t]
    last_after = [answers[n][-1] for n, t in doubles if t >= heal_t]
    # Unanswered runs: from the first unanswered question to the next answered one (or the
    # last question, when the watch ended first).
    silences = []
    run_from = None
    for n, t in rounds:
        if answers.get(n):
            if run_from is not None:
                silences.append((run_from, t))
                run_from = None
        elif run_from is None:
            run_from = t
    if run_from is not None:
        silences.append((run_from, rounds[-1][1] + INTERVAL_MS))
    long_during = [b - a for a, b in silences if b - a > SILENCE_MS and a < heal_t]
    long_after = [b - a for a, b in silences if b - a > SILENCE_MS and a >= heal_t]
    disturbed = any(set(answers.get(n, [])) - {rightful} for n, t in rounds if t >= cut_t)
    reassert = next((t - heal_t for t, m in record["gratuitous"] if m == rightful and t >= heal_t),
                    None)
    last_answered = [answers[n] for n, t in rounds if answers.get(n)]
    final = last_answered[-1] if last_answered else []
    # From the heal to the first question from which on the rightful owner alone answered every
    # question (None if that never held until the watch ended).
    settled_at = None
    for n, t in reversed(rounds):
        if t < heal_t or set(answers.get(n, [])) != {rightful}:
            break
        settled_at = t
    # Who answered, from the cut on, as runs of questions with the same answering hosts:
    # [ms since the heal, hosts ("+"-joined in arrival order of their first answer, "-" for
    # none), questions], for reading a schedule's story in the JSON.
    runs = []
    for n, t in rounds:
        if t < cut_t:
            continue
        who = "+".join(dict.fromkeys(hosts.get(m, m) for m in answers.get(n, []))) or "-"
        if runs and runs[-1][1] == who:
            runs[-1][2] += 1
        else:
            runs.append([round(t - heal_t), who, 1])
    return {
        "questions": len(rounds),
        "double_questions": len(doubles),
        "double_window_during_cut_ms": max(during, default=0),
        "double_window_after_heal_ms": max(after, default=0),
        "double_window_after_healed_ms": max(after_healed, default=0),
        "double_questions_after_heal": len(last_after),
        "last_answer_not_rightful_after_heal": sum(m != rightful for m in last_after),
        "disturbed": disturbed,
        "heal_to_rightful_garp_ms": reassert,
        "unanswered_over_100ms_during_cut_ms": max(long_during, default=0),
        "unanswered_over_100ms_after_heal_ms": max(long_after, default=0),
        "ended_with_rightful_alone": final == [rightful] or set(final) == {rightful},
        "heal_to_rightful_alone_ms": None if settled_at is None else settled_at - heal_t,
        "gratuitous_since_cut": [[round(t - heal_t), hosts.get(m, m)]
                                 for t, m in record["gratuitous"] if t >= cut_t],
        "answers_since_cut": runs,
        "answering_hosts": sorted({hosts.get(m, m) for ms in answers.values() for m in ms}),
    }


def summarise(kind, number, side, method, cut_ms, guard, owners, per_vip):
    vals = list(per_vip.values())
    needed = [v for v in vals if v["disturbed"]]
    garps = [v["heal_to_rightful_garp_ms"] for v in needed]
    return {
        "kind": kind, "n": number, "guard": guard, "side": side, "method": method,
        "cut_ms": cut_ms,
        "owners_on_cut_side": sorted({o for o in owners.values() if o in side}),
        "double_window_during_cut_ms": max(v["double_window_during_cut_ms"] for v in vals),
        "double_window_after_heal_ms": max(v["double_window_after_heal_ms"] for v in vals),
        "double_window_after_healed_ms": max(v["double_window_after_healed_ms"] for v in vals),
        "double_questions_after_heal": sum(v["double_questions_after_heal"] for v in vals),
        "last_answer_not_rightful_after_heal": sum(v["last_answer_not_rightful_after_heal"]
                                                   for v in vals),
        "vips_disturbed": len(needed),
        "heal_to_rightful_garp_ms_max": max((g for g in garps if g is not None), default=None),
        "vips_without_rightful_garp": sum(g is None for g in garps),
        "unanswered_over_100ms_during_cut_ms": max(v["unanswered_over_100ms_during_cut_ms"]
                                                   for v in vals),
        "unanswered_over_100ms_after_heal_ms": max(v["unanswered_over_100ms_after_heal_ms"]
                                                   for v in vals),
        "vips_ended_with_rightful_alone": sum(v["ended_with_rightful_alone"] for v in vals),
        "heal_to_rightful_alone_ms_max": max(
            (v["heal_to_rightful_alone_ms"] for v in needed
             if v["heal_to_rightful_alone_ms"] is not None), default=None),
        "vips": per_vip,
    }


def fmt(v):
    return "-" if v is None else f"{v:.0f}"


def line(r):
    return (f"{r['kind']} #{r['n']} guard={'on' if r['guard'] else 'off'} "
            f"{r['method']} {'+'.join(r['side'])} {r['cut_ms']} ms "
            f"(owners cut: {','.join(r['owners_on_cut_side']) or '-'}): two MACs during the cut "
            f"{fmt(r['double_window_during_cut_ms'])} ms, after the heal "
            f"{fmt(r['double_window_after_heal_ms'])} ms (from its end "
            f"{fmt(r['double_window_after_healed_ms'])}; {r['double_questions_after_heal']} "
            f"questions, last answer not the rightful owner's in "
            f"{r['last_answer_not_rightful_after_heal']}); heal to GARP max "
            f"{fmt(r['heal_to_rightful_garp_ms_max'])} ms over {r['vips_disturbed']} disturbed "
            f"VIPs ({r['vips_without_rightful_garp']} without); unanswered > 100 ms: cut "
            f"{fmt(r['unanswered_over_100ms_during_cut_ms'])}, after "
            f"{fmt(r['unanswered_over_100ms_after_heal_ms'])} ms; rightful alone from "
            f"{fmt(r['heal_to_rightful_alone_ms_max'])} ms after the heal, at the end "
            f"{r['vips_ended_with_rightful_alone']}/{len(VIPS)}")


def p50_max(values):
    if not values:
        return "-"
    return f"{fmt(percentile(values, 50))} / {fmt(max(values))}"


def table(results):
    lines = ["| guard | schedules | n | two MACs after the heal: schedules; longest window "
             "p50 / max (ms) | the same from the heal's end (its last command returned) | "
             "doubly answered questions after the heal: last answer not the "
             "rightful owner's | heal to the rightful owner's GARP, disturbed VIPs: p50 / p90 / "
             "max (ms); none | unanswered > 100 ms after the heal: schedules; longest (ms) | "
             "during the cut: two MACs (schedules; longest ms); unanswered > 100 ms (schedules; "
             "longest ms) | heal to the rightful owner alone, disturbed VIPs: p50 / max (ms) "
             "| VIPs ending with the rightful owner alone |",
             "|---|---|---:|---|---|---|---|---|---|---|---:|"]
    for guard in (False, True):
        for kind in ("random", "cut"):
            rs = [r for r in results if r["guard"] == guard and r["kind"] == kind]
            if not rs:
                continue
            after = [r["double_window_after_heal_ms"] for r in rs
                     if r["double_window_after_heal_ms"]]
            after_healed = [r["double_window_after_healed_ms"] for r in rs
                            if r["double_window_after_healed_ms"]]
            garps = [v["heal_to_rightful_garp_ms"] for r in rs for v in r["vips"].values()
                     if v["disturbed"]]
            got = [g for g in garps if g is not None]
            silent_after = [r["unanswered_over_100ms_after_heal_ms"] for r in rs
                            if r["unanswered_over_100ms_after_heal_ms"]]
            during = [r["double_window_during_cut_ms"] for r in rs
                      if r["double_window_during_cut_ms"]]
            silent_during = [r["unanswered_over_100ms_during_cut_ms"] for r in rs
                             if r["unanswered_over_100ms_during_cut_ms"]]
            doubles = sum(r["double_questions_after_heal"] for r in rs)
            wrong = sum(r["last_answer_not_rightful_after_heal"] for r in rs)
            ended = sum(r["vips_ended_with_rightful_alone"] for r in rs)
            alone = [v["heal_to_rightful_alone_ms"] for r in rs for v in r["vips"].values()
                     if v["disturbed"] and v["heal_to_rightful_alone_ms"] is not None]
            lines.append(
                f"| {'on' if guard else 'off'} | {kind} | {len(rs)} | {len(after)}; "
                f"{p50_max(after)} | {len(after_healed)}; {p50_max(after_healed)} | "
                f"{wrong} / {doubles} | "
                f"{fmt(percentile(got, 50))} / {fmt(percentile(got, 90))} / "
                f"{fmt(max(got, default=None))}; {len(garps) - len(got)} of {len(garps)} | "
                f"{len(silent_after)}; {fmt(max(silent_after, default=None))} | "
                f"{len(during)}; {fmt(max(during, default=None))}; {len(silent_during)}; "
                f"{fmt(max(silent_during, default=None))} | {p50_max(alone)} | "
                f"{ended} / {len(rs) * len(VIPS)} |")
    return "\n".join(lines)


def random_schedules(rng, hosts, count):
    sides = [list(c) for k in (1, 2) for c in itertools.combinations(hosts, k)]
    return [(rng.choice(sides), rng.choice(["link", "nft"]), rng.randint(300, 3000))
            for _ in range(count)]


def main():
    bin_dir = sys.argv[1]
    schedules = int(os.environ.get("SCHEDULES", "100"))
    cuts = int(os.environ.get("CUT", "20"))
    seed = int(os.environ.get("SEED", str(int(time.time()))))
    post_ms = int(os.environ.get("POST_MS", "4000"))
    guards = [{"off": False, "on": True}[g] for g in os.environ.get("GUARD", "off,on").split(",")]
    results_path = os.environ.get("RESULTS", "")
    lab = L.Lab(5, bin_dir, tag="vgpt")
    lab.close_on_signals()
    started = time.time()
    results = []
    skipped = []
    try:
        lab.build()
        bench = Partitions(lab, post_ms)
        rng = random.Random(seed)
        plan = random_schedules(rng, lab.hosts(), schedules)
        log(f"seed {seed}: {schedules} random schedules, {cuts} cut owners, "
            f"{post_ms} ms watched after each heal, guard {os.environ.get('GUARD', 'off,on')}")
        # ONLY=50,53 runs those of the seeded plan (to look into one again, KEEP_LOGS=1).
        only = {int(n) for n in os.environ.get("ONLY", "").split(",") if n.strip()}
        plan = [(n, s) for n, s in enumerate(plan, 1) if not only or n in only]
        for n, (side, method, cut_ms) in plan:
            log(f"schedule {n}: {method} {'+'.join(side)} for {cut_ms} ms")
        for guard in guards:
            log(f"== guard {'on (expected_members: 5)' if guard else 'off'}")
            bench.start(guard)
            for n, (side, method, cut_ms) in plan:
                try:
                    results.append(bench.schedule("random", n, side, method, cut_ms, guard))
                except Skipped:
                    skipped.append(("random", n, guard))
            for n in range(1, cuts + 1):
                try:
                    owners = bench.settled_or_restart(guard)
                    owning = sorted(set(owners.values()))
                    victim = owning[(n - 1) % len(owning)]
                    results.append(bench.schedule("cut", n, [victim], "link", 2000, guard))
                except Skipped:
                    skipped.append(("cut", n, guard))
            bench.stop()
        text = table(results)
        print()
        print(text)
        if skipped:
            print(f"\nskipped (no settle): {skipped}")
        print(f"\n(seed {seed}; run took {time.time() - started:.0f} s)")
    finally:
        lab.close()
        if results_path:
            # Also after a failure or Ctrl-C: what was measured so far.
            with open(results_path, "w") as f:
                json.dump({"seed": seed, "post_ms": post_ms, "vips": VIPS,
                           "table": table(results), "skipped": skipped,
                           "schedules": results}, f, indent=1)


if __name__ == "__main__":
    main()

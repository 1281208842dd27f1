"""A five-host failover lab in network namespaces, shared by bench/failover and bench/soak.

A bridge `br0` in a namespace of its own, a client `c` (198.18.8.2/24) and hosts h1..hN
(198.18.8.11..) plugged into it with veth pairs (the host side is `eth0`, the bridge side
`p<i>`). Nothing touches the root namespace; every address is in 198.18.8.0/24.

On each host the vigil VIP is also put on `lo` (with arp_ignore=1 / arp_announce=2, so the
host's kernel never answers ARP for it: only vigil does), which lets the kernel of whichever
host gets the traffic answer ICMP echo for it, as a kube-proxy node or a DSR backend would.
keepalived puts its VIPs on eth0 itself.

Every process is started by this module and killed by PID in `Lab.close()`; the namespaces
are deleted there too (callers run it from `finally` and from signal handlers).
"""

import json
import math
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

SUBNET = "198.18.8"
CLIENT_IP = f"{SUBNET}.2"
VIGIL_VIP = f"{SUBNET}.100"
KA_VIP_SLOW = f"{SUBNET}.101"   # keepalived, advert_int 1 (its default)
KA_VIP_FAST = f"{SUBNET}.102"   # keepalived, advert_int 0.1 (VRRPv3)
KA_VIP_FASTEST = f"{SUBNET}.103"  # keepalived, other advert_int (VRRPv3; 0.01 its floor)
GOPEER_PORT = 7947
TCP_PORT = 8080
TCP_SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "tcp.py")


def host_ip(i):
    return f"{SUBNET}.{10 + i}"


def run(args, check=True, **kw):
    return subprocess.run(args, check=check, stdin=subprocess.DEVNULL,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)


class Lab:
    def __init__(self, nodes, bin_dir, tag="vgfb"):
        self.nodes = nodes
        self.bin = bin_dir
        self.prefix = f"{tag}{os.getpid()}"
        self.work = tempfile.mkdtemp(prefix=f"{self.prefix}-")
        self.namespaces = []
        self.procs = {}      # key -> Popen
        self.stopped = set()  # hosts frozen with SIGSTOP
        self.macs = {}
        self.closed = False

    # -- lab --------------------------------------------------------------------------
    def ns(self, host):
        return f"{self.prefix}-{host}"

    def hosts(self):
        return [f"h{i}" for i in range(1, self.nodes + 1)]

    def build(self):
        br = self.ns("br")
        run(["ip", "netns", "add", br])
        self.namespaces.append(br)
        run(["ip", "-n", br, "link", "set", "lo", "up"])
        run(["ip", "-n", br, "link", "add", "br0", "type", "bridge"])
        run(["ip", "-n", br, "link", "set", "br0", "up"])
        for table in ("arptables", "iptables", "ip6tables"):
            run(["ip", "netns", "exec", br, "sysctl", "-qw",
                 f"net.bridge.bridge-nf-call-{table}=0"], check=False)
        self._plug("c", "pc", f"{CLIENT_IP}/24")
        for i, h in enumerate(self.hosts(), 1):
            self._plug(h, f"p{i}", f"{host_ip(i)}/24")
            for key, value in (("arp_ignore", 1), ("arp_announce", 2)):
                for dev in ("all", "eth0"):
                    run(["ip", "netns", "exec", self.ns(h), "sysctl", "-qw",
                         f"net.ipv4.conf.{dev}.{key}={value}"])
            run(["ip", "-n", self.ns(h), "addr", "add", f"{VIGIL_VIP}/32", "dev", "lo"])
            self.macs[h] = self.mac(h)
        run([f"{self.bin}/vigil", "keygen", "--out", self.path("keyring.json")])

    def _plug(self, host, port, cidr):
        ns = self.ns(host)
        run(["ip", "netns", "add", ns])
        self.namespaces.append(ns)
        run(["ip", "-n", ns, "link", "set", "lo", "up"])
        run(["ip", "link", "add", "eth0", "netns", ns, "type", "veth", "peer", "name", port,
             "netns", self.ns("br")])
        run(["ip", "-n", self.ns("br"), "link", "set", port, "master", "br0", "up"])
        run(["ip", "-n", ns, "addr", "add", cidr, "dev", "eth0"])
        run(["ip", "-n", ns, "link", "set", "eth0", "up"])

    def mac(self, host):
        out = run(["ip", "-n", self.ns(host), "-o", "link", "show", "eth0"]).stdout
        return out.split("link/ether ")[1].split()[0]

    def host_of_mac(self, mac):
        for h, m in self.macs.items():
            if m == mac:
                return h
        return None

    def path(self, name):
        return os.path.join(self.work, name)

    def close(self):
        if self.closed:
            return
        self.closed = True
        for proc in list(self.procs.values()):
            try:
                os.kill(proc.pid, signal.SIGCONT)
                proc.kill()
                proc.wait(timeout=5)
            except Exception:
                pass
        for ns in reversed(self.namespaces):
            # Anything left in a namespace is ours (keepalived's children): kill by PID.
            pids = run(["ip", "netns", "pids", ns], check=False).stdout.split()
            for pid in pids:
                try:
                    os.kill(int(pid), signal.SIGKILL)
                except Exception:
                    pass
            run(["ip", "netns", "del", ns], check=False)
        if os.environ.get("KEEP_LOGS"):
            print(f"logs kept in {self.work}")
        else:
            shutil.rmtree(self.work, ignore_errors=True)

    def close_on_signals(self, also=None):
        """On SIGINT or SIGTERM: remove the lab, run `also` (more clean-up), exit 128 + signal."""
        def on_signal(signum, _frame):
            self.close()
            if also is not None:
                also()
            sys.exit(128 + signum)

        signal.signal(signal.SIGINT, on_signal)
        signal.signal(signal.SIGTERM, on_signal)

    # -- processes --------------------------------------------------------------------
    def spawn(self, key, host, args, log_name, stdout_name=None, stdin_pipe=False):
        log = open(self.path(log_name), "a")
        out = open(self.path(stdout_name), "a") if stdout_name else log
        proc = subprocess.Popen(["ip", "netns", "exec", self.ns(host)] + args,
                                stdin=subprocess.PIPE if stdin_pipe else subprocess.DEVNULL,
                                stdout=out, stderr=log)
        log.close()
        out.close()
        self.procs[key] = proc
        return proc

    def send_signal(self, key, sig):
        proc = self.procs.get(key)
        if proc is not None and proc.poll() is None:
            os.kill(proc.pid, sig)

    def stop(self, key, sig=signal.SIGKILL, wait=15.0):
        """Sends `sig` to a process and waits (bounded) for it to exit; SIGKILL after that."""
        proc = self.procs.pop(key, None)
        if proc is None:
            return
        if proc.poll() is None:
            os.kill(proc.pid, sig)
            try:
                proc.wait(timeout=wait)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()

    # -- vigil ------------------------------------------------------------------------
    def vigil_config(self, host, profile):
        i = int(host[1:])
        seeds = ", ".join(host_ip(j) for j in range(1, self.nodes + 1))
        return (f"node: {{name: {host}}}\n"
                f"gossip: {{bind: \"{host_ip(i)}:7946\", seeds: [{seeds}], "
                f"profile: {profile}, keyring_file: {self.path('keyring.json')}}}\n"
                "interfaces: {include: [eth0]}\n"
                "http: {listen: \"127.0.0.1:7472\"}\n"
                "services:\n"
                f"  - name: web\n    vips: [{VIGIL_VIP}]\n")

    def start_vigil(self, host, profile="fast"):
        conf = self.path(f"vigil-{host}.yaml")
        with open(conf, "w") as f:
            f.write(self.vigil_config(host, profile))
        self.spawn(f"vigil-{host}", host,
                   [f"{self.bin}/vigil", "standalone", "--config", conf, "--log-level", "info"],
                   f"vigil-{host}.log")

    def vigil_status(self, host):
        out = run(["ip", "netns", "exec", self.ns(host), f"{self.bin}/vigil", "status", "--json",
                   "--addr", "127.0.0.1:7472"], check=False, timeout=5)
        if out.returncode != 0:
            return None
        try:
            return json.loads(out.stdout)
        except ValueError:
            return None

    def vigil_view(self, host):
        """(alive member names, owner of the VIP) as `host` sees them, or None."""
        status = self.vigil_status(host)
        if status is None:
            return None
        alive = sorted(m["name"] for m in status.get("members", []) if m.get("state") == "alive")
        owner = next((v.get("owner") for v in status.get("vips", []) if v.get("vip") == VIGIL_VIP),
                     None)
        return alive, owner

    def metrics(self, host):
        script = ("exec 3<>/dev/tcp/127.0.0.1/7472; printf 'GET /metrics HTTP/1.0\\r\\n\\r\\n' >&3;"
                  " timeout 5 cat <&3")
        return run(["ip", "netns", "exec", self.ns(host), "bash", "-c", script],
                   check=False, timeout=10).stdout

    # -- keepalived -------------------------------------------------------------------
    def keepalived_config(self, host, advert):
        i = int(host[1:])
        priority = 160 - 10 * i  # h1 is the master whenever it is up
        vip, vrid, version = keepalived_instance(advert)
        return (f"global_defs {{\n  router_id {host}\n  vrrp_version {version}\n"
                "  script_user root\n}\n"
                f"vrrp_instance VI_{vrid} {{\n  state BACKUP\n  interface eth0\n"
                f"  virtual_router_id {vrid}\n  priority {priority}\n  advert_int {advert}\n"
                f"  virtual_ipaddress {{\n    {vip}/24 dev eth0\n  }}\n}}\n")

    def start_keepalived(self, host, advert):
        tag = f"{keepalived_tag(advert)}-{host}"
        conf = self.path(f"{tag}.conf")
        with open(conf, "w") as f:
            f.write(self.keepalived_config(host, advert))
        # -n: stay in the foreground (the PID we hold is the parent; its VRRP child is in
        # the same namespace and is found with `ip netns pids` when we need it).
        self.spawn(tag, host,
                   ["keepalived", "-n", "-l", "-D", "-G", "-P", "-f", conf,
                    "-p", self.path(f"{tag}.pid"), "-r", self.path(f"{tag}.vrrp.pid")],
                   f"{tag}.log")

    def keepalived_pids(self, host, advert):
        """The keepalived parent and its VRRP child for `host` (by their PID files)."""
        tag = f"{keepalived_tag(advert)}-{host}"
        pids = []
        for name in (f"{tag}.pid", f"{tag}.vrrp.pid"):
            try:
                with open(self.path(name)) as f:
                    pids.append(int(f.read().strip()))
            except (OSError, ValueError):
                pass
        return pids

    # -- Go memberlist (conformance/cmd/vigil-gopeer) -----------------------------------
    def start_gopeer(self, host, gopeer):
        i = int(host[1:])
        seeds = ",".join(f"{host_ip(j)}:{GOPEER_PORT}" for j in range(1, self.nodes + 1) if j != i)
        self.spawn(f"gopeer-{host}", host,
                   [gopeer, "-name", host, "-bind", host_ip(i), "-port", str(GOPEER_PORT),
                    "-profile", "lan", "-seeds", seeds],
                   f"gopeer-{host}.log", stdout_name=f"gopeer-{host}.jsonl", stdin_pipe=True)

    def gopeer_events(self, host):
        events = []
        try:
            with open(self.path(f"gopeer-{host}.jsonl")) as f:
                for line in f:
                    try:
                        events.append(json.loads(line))
                    except ValueError:
                        pass
        except OSError:
            pass
        return events

    def addresses(self, host):
        return run(["ip", "-n", self.ns(host), "-o", "addr", "show", "dev", "eth0"]).stdout

    # -- host loss --------------------------------------------------------------------
    def link(self, host, up):
        port = f"p{int(host[1:])}"
        run(["ip", "-n", self.ns("br"), "link", "set", port, "up" if up else "down"])

    def freeze(self, host, frozen):
        """SIGSTOP (or SIGCONT) every process in the host's namespace."""
        pids = run(["ip", "netns", "pids", self.ns(host)], check=False).stdout.split()
        for pid in pids:
            try:
                os.kill(int(pid), signal.SIGSTOP if frozen else signal.SIGCONT)
            except ProcessLookupError:
                pass
        if frozen:
            self.stopped.add(host)
        else:
            self.stopped.discard(host)

    # -- the client -------------------------------------------------------------------
    def arp_answers(self, vip, wait_ms=150):
        out = run(["ip", "netns", "exec", self.ns("c"), f"{self.bin}/vigil-l2-client", "arp",
                   "--iface", "eth0", "--src-ip", CLIENT_IP, "--target", vip,
                   "--wait-ms", str(wait_ms)], check=False, timeout=10).stdout
        macs = []
        for line in out.splitlines():
            for word in line.split():
                if word.startswith("mac="):
                    macs.append(word[4:])
        return sorted(set(macs))

    def start_tcp_servers(self):
        """The small server of the TCP figure on every host (tcp.py serve)."""
        for h in self.hosts():
            if f"tcpd-{h}" not in self.procs:
                self.spawn(f"tcpd-{h}", h, ["python3", TCP_SCRIPT, "serve", h, str(TCP_PORT)],
                           f"tcpd-{h}.log")

    def tcp_client(self, vip, duration_ms):
        """The TCP client (tcp.py client) in the client's namespace, for `duration_ms`."""
        args = ["ip", "netns", "exec", self.ns("c"), "python3", TCP_SCRIPT, "client", vip,
                str(TCP_PORT), str(duration_ms)]
        return subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)

    def watch(self, vip, duration_ms, stop_after_change_ms=None, interval_ms=5, extra=()):
        args = ["ip", "netns", "exec", self.ns("c"), f"{self.bin}/vigil-l2-client", "watch",
                "--iface", "eth0", "--src-ip", CLIENT_IP, "--target", vip,
                "--interval-ms", str(interval_ms), "--duration-ms", str(duration_ms), "--icmp"]
        if stop_after_change_ms is not None:
            args += ["--stop-after-change-ms", str(stop_after_change_ms)]
        args += list(extra)
        return subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)


def keepalived_instance(advert):
    """(VIP, VRID, VRRP version) of the keepalived instance with `advert_int advert` (seconds,
    as keepalived reads it): VRRPv2 at 1 s, VRRPv3 below (it counts in centiseconds; 2.2.7
    refuses anything under 0.01 and falls back to 1 s). Each interval has its own VIP and
    VRID so that rows and soaks never mistake one instance's answers for another's."""
    if advert == "1":
        return KA_VIP_SLOW, 51, 2
    if advert == "0.1":
        return KA_VIP_FAST, 52, 3
    return KA_VIP_FASTEST, 53, 3


def keepalived_tag(advert):
    """The file and process key prefix of a keepalived instance: `ka01` for 0.1 s."""
    return f"ka{advert.replace('.', '')}"


def fields(line):
    out = {}
    for word in line.split()[1:]:
        if "=" in word:
            k, v = word.split("=", 1)
            out[k] = v
    return out


def parse_watch(text):
    """{'arp': summary fields, 'icmp': ..., 'events': [lines]}"""
    result = {"events": []}
    for line in text.splitlines():
        if line.startswith("summary "):
            f = fields(line)
            result[f["kind"]] = f
        elif line.startswith(("mac-change ", "outage ")):
            result["events"].append(line)
    return result


def wait_until(limit, every, check):
    end = time.monotonic() + limit
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > end:
            return None
        time.sleep(every)


def log(msg):
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def percentile(values, p):
    """The nearest-rank p-th percentile of `values`; None when there are none."""
    if not values:
        return None
    s = sorted(values)
    return s[max(1, math.ceil(p / 100 * len(s))) - 1]

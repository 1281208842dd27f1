"""The failover benchmark's TCP figure (issue 23 item 6): what a TCP client of the VIP sees.

  python3 tcp.py serve NAME PORT
      on every host: accept connections on 0.0.0.0:PORT, answer each request line with NAME
      and close (one connection per request, as a short HTTP exchange would be).
  python3 tcp.py client VIP PORT DURATION_MS [INTERVAL_MS] [TIMEOUT_MS]
      in the client's namespace: a new connection every INTERVAL_MS (default 10): connect,
      send a line, read the answer, each step bounded by TIMEOUT_MS (default 50; a failed
      connect is retried with a new socket, never left to the kernel's 1 s SYN retry). One
      line per answer (`ok t_ms=... host=...`), then
      `summary kind=tcp max_gap_ms=... last_host=... ok=... failed=... open=...`:
      the longest span between two answered requests (or from the last answer to the end,
      `open=1`, when none came back), what the client went without.

Uses the client's own kernel (its ARP cache, its TCP), unlike `vigil-l2-client watch`, which
asks by raw ARP: the kernel's neighbour entry for the VIP follows the new owner's gratuitous
ARP, and each request is a new connection, so an answer means the new owner's host took it.
"""

import select
import socket
import sys
import time


def serve(name, port):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("0.0.0.0", port))
    s.listen(128)
    reply = (name + "\n").encode()
    while True:
        c, _ = s.accept()
        try:
            c.settimeout(1.0)
            c.recv(64)
            c.sendall(reply)
        except OSError:
            pass
        finally:
            c.close()


def request(vip, port, timeout):
    """The answering host's name, or None."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setblocking(False)
    try:
        try:
            s.connect((vip, port))
        except BlockingIOError:
            pass
        _, w, _ = select.select([], [s], [], timeout)
        if not w or s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR) != 0:
            return None
        s.send(b"q\n")
        r, _, _ = select.select([s], [], [], timeout)
        if not r:
            return None
        data = s.recv(64)
        return data.decode(errors="replace").strip() or None
    except OSError:
        return None
    finally:
        s.close()


def client(vip, port, duration_ms, interval_ms, timeout_ms):
    start = time.monotonic()
    end = start + duration_ms / 1000
    last_ok = None
    max_gap = 0.0
    ok = failed = 0
    last_host = "-"
    while True:
        now = time.monotonic()
        if now >= end:
            break
        host = request(vip, port, timeout_ms / 1000)
        t = time.monotonic()
        if host is not None:
            ok += 1
            last_host = host
            if last_ok is not None:
                max_gap = max(max_gap, (t - last_ok) * 1000)
            last_ok = t
            print(f"ok t_ms={(t - start) * 1000:.1f} host={host}", flush=True)
        else:
            failed += 1
        rest = interval_ms / 1000 - (time.monotonic() - now)
        if rest > 0:
            time.sleep(rest)
    t = time.monotonic()
    open_ = 0
    if last_ok is None or (t - last_ok) * 1000 > max(max_gap, 4 * interval_ms + timeout_ms):
        open_ = 1
        max_gap = max(max_gap, (t - (last_ok or start)) * 1000)
    print(f"summary kind=tcp max_gap_ms={max_gap:.1f} last_host={last_host} ok={ok} "
          f"failed={failed} open={open_}", flush=True)


def main():
    if sys.argv[1] == "serve":
        serve(sys.argv[2], int(sys.argv[3]))
    elif sys.argv[1] == "client":
        args = [int(a) for a in sys.argv[4:]]
        duration, interval, timeout = (args + [10, 50])[:3]
        client(sys.argv[2], int(sys.argv[3]), duration, interval, timeout)
    else:
        raise SystemExit(f"unknown mode {sys.argv[1]!r}")


if __name__ == "__main__":
    main()

//! Working inside the lab's network namespaces from the lab process itself: a thread that has
//! joined a namespace with `setns` opens its sockets there (a namespace is per thread), so
//! asking a speaker for `/status` on its loopback or asking ARP questions from the client needs
//! no helper process.

use nix::sched::{CloneFlags, setns};
use std::fs::File;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::time::Duration;

/// Moves the calling thread into the network namespace `ns` (as made by `ip netns add`).
pub(super) fn enter(ns: &str) -> io::Result<()> {
    let file = File::open(Path::new("/run/netns").join(ns))
        .map_err(|e| io::Error::new(e.kind(), format!("namespace {ns}: {e}")))?;
    setns(&file, CloneFlags::CLONE_NEWNET)
        .map_err(|e| io::Error::other(format!("setns into {ns}: {e}")))
}

/// Runs `f` on a thread inside the network namespace `ns` and returns what it returns.
pub(super) fn run_in<T: Send>(ns: &str, f: impl FnOnce() -> T + Send) -> io::Result<T> {
    std::thread::scope(|scope| {
        let worker = scope.spawn(|| enter(ns).map(|()| f()));
        match worker.join() {
            Ok(result) => result,
            Err(panic) => std::panic::resume_unwind(panic),
        }
    })
}

/// A plain HTTP/1.0 GET with bounded time; the body of a 200 answer.
pub(super) fn http_get(addr: SocketAddr, path: &str, limit: Duration) -> Result<String, String> {
    let mut s = TcpStream::connect_timeout(&addr, limit).map_err(|e| e.to_string())?;
    s.set_read_timeout(Some(limit)).map_err(|e| e.to_string())?;
    s.set_write_timeout(Some(limit))
        .map_err(|e| e.to_string())?;
    write!(s, "GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").map_err(|e| e.to_string())?;
    let mut text = String::new();
    s.take(4 * 1024 * 1024)
        .read_to_string(&mut text)
        .map_err(|e| e.to_string())?;
    let (head, body) = text.split_once("\r\n\r\n").ok_or("not an HTTP answer")?;
    let status = head.lines().next().unwrap_or_default();
    if status.split_whitespace().nth(1) != Some("200") {
        return Err(format!("{status}: {}", body.trim()));
    }
    Ok(body.to_string())
}

//! Health checks, like keepalived's track scripts: one task per checked service probes on its
//! interval and reports when the result flips (after `rise` passes or `fall` failures, the
//! speaker core's [`Hysteresis`]). A check starts out failing, so a node becomes a candidate
//! only after its first passes.

use super::config::{HealthCheck, Probe};
use std::collections::BTreeMap;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio::time::timeout;
use vigil_speaker::core::Hysteresis;

/// A check's result flipped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HealthChange {
    /// The service.
    pub service: String,
    /// Whether it now passes.
    pub passing: bool,
    /// What the last probe saw.
    pub detail: String,
}

struct Running {
    check: HealthCheck,
    task: JoinHandle<()>,
}

/// The running checks, one per checked service.
pub struct Checks {
    running: BTreeMap<String, Running>,
    tx: mpsc::UnboundedSender<HealthChange>,
}

impl Drop for Checks {
    fn drop(&mut self) {
        for r in self.running.values() {
            r.task.abort();
        }
    }
}

impl Checks {
    /// No checks yet; changes will arrive on the returned receiver.
    pub fn new() -> (Self, mpsc::UnboundedReceiver<HealthChange>) {
        let (tx, rx) = mpsc::unbounded_channel();
        (
            Self {
                running: BTreeMap::new(),
                tx,
            },
            rx,
        )
    }

    /// Makes the running checks match `wanted`: unchanged checks keep running (and keep their
    /// state); changed or new ones restart failing; removed ones stop. Returns the services
    /// whose check (re)started, which now count as failing.
    pub fn sync(&mut self, wanted: &BTreeMap<String, HealthCheck>) -> Vec<String> {
        self.running.retain(|name, r| {
            let keep = wanted.get(name) == Some(&r.check);
            if !keep {
                r.task.abort();
            }
            keep
        });
        let mut started = Vec::new();
        for (name, check) in wanted {
            if self.running.contains_key(name) {
                continue;
            }
            let task = tokio::spawn(run(name.clone(), check.clone(), self.tx.clone()));
            self.running.insert(
                name.clone(),
                Running {
                    check: check.clone(),
                    task,
                },
            );
            started.push(name.clone());
        }
        started
    }
}

async fn run(service: String, check: HealthCheck, tx: mpsc::UnboundedSender<HealthChange>) {
    let mut state = Hysteresis::new(check.rise, check.fall);
    let mut ticker = tokio::time::interval(check.interval);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticker.tick().await;
        let result = match timeout(check.timeout, probe(&check.probe, check.timeout)).await {
            Ok(r) => r,
            Err(_) => Err(format!("no answer within {:?}", check.timeout)),
        };
        if let Some(passing) = state.record(result.is_ok()) {
            let detail = result.unwrap_or_else(|e| e);
            if tx
                .send(HealthChange {
                    service: service.clone(),
                    passing,
                    detail,
                })
                .is_err()
            {
                return;
            }
        }
    }
}

/// One try: `Ok(what passed)` or `Err(what failed)`.
async fn probe(probe: &Probe, limit: Duration) -> Result<String, String> {
    match probe {
        Probe::Tcp(target) => TcpStream::connect(target.as_str())
            .await
            .map(|_| format!("connected to {target}"))
            .map_err(|e| format!("connect {target}: {e}")),
        Probe::Http { authority, path } => http_get(authority, path).await,
        Probe::Command(argv) => {
            let mut cmd = tokio::process::Command::new(&argv[0]);
            cmd.args(&argv[1..])
                .stdin(std::process::Stdio::null())
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .kill_on_drop(true);
            match timeout(limit, cmd.status()).await {
                Ok(Ok(status)) if status.success() => Ok(format!("{} exited 0", argv[0])),
                Ok(Ok(status)) => Err(format!("{} {status}", argv[0])),
                Ok(Err(e)) => Err(format!("cannot run {}: {e}", argv[0])),
                Err(_) => Err(format!("{} ran past {limit:?}", argv[0])),
            }
        }
    }
}

async fn http_get(authority: &str, path: &str) -> Result<String, String> {
    let mut stream = TcpStream::connect(authority)
        .await
        .map_err(|e| format!("connect {authority}: {e}"))?;
    let request = format!(
        "GET {path} HTTP/1.0\r\nHost: {authority}\r\nUser-Agent: vigil\r\nConnection: close\r\n\r\n"
    );
    stream
        .write_all(request.as_bytes())
        .await
        .map_err(|e| format!("write to {authority}: {e}"))?;
    // The status line is all we need; read at most a little.
    let mut buf = vec![0u8; 256];
    let mut len = 0;
    while len < buf.len() && !buf[..len].contains(&b'\n') {
        match stream.read(&mut buf[len..]).await {
            Ok(0) => break,
            Ok(n) => len += n,
            Err(e) => return Err(format!("read from {authority}: {e}")),
        }
    }
    let line = String::from_utf8_lossy(&buf[..len]);
    let line = line.lines().next().unwrap_or_default();
    let code: Option<u16> = line.split_whitespace().nth(1).and_then(|c| c.parse().ok());
    match code {
        Some(c) if (200..300).contains(&c) => Ok(format!("GET http://{authority}{path}: {c}")),
        Some(c) => Err(format!("GET http://{authority}{path}: {c}")),
        None => Err(format!("GET http://{authority}{path}: not an HTTP answer")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::net::TcpListener;

    fn check(probe: Probe) -> HealthCheck {
        HealthCheck {
            probe,
            interval: Duration::from_millis(20),
            timeout: Duration::from_millis(20),
            rise: 2,
            fall: 1,
        }
    }

    async fn next(rx: &mut mpsc::UnboundedReceiver<HealthChange>) -> HealthChange {
        timeout(Duration::from_secs(10), rx.recv())
            .await
            .expect("a health change in time")
            .expect("open channel")
    }

    #[tokio::test]
    async fn tcp_and_command_checks_rise_and_fall() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let (mut checks, mut rx) = Checks::new();
        let wanted = BTreeMap::from([
            ("tcp".to_string(), check(Probe::Tcp(addr))),
            (
                "cmd".to_string(),
                check(Probe::Command(vec![
                    "/bin/sh".into(),
                    "-c".into(),
                    "exit 0".into(),
                ])),
            ),
        ]);
        assert_eq!(checks.sync(&wanted).len(), 2);
        let mut seen = BTreeMap::new();
        while seen.len() < 2 {
            let c = next(&mut rx).await;
            assert!(c.passing, "{c:?}");
            seen.insert(c.service, c.passing);
        }
        // Unchanged checks keep running; closing the port makes the TCP check fail.
        assert!(checks.sync(&wanted).is_empty());
        drop(listener);
        let c = next(&mut rx).await;
        assert_eq!((c.service.as_str(), c.passing), ("tcp", false), "{c:?}");
    }

    #[tokio::test]
    async fn http_check_wants_2xx() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let authority = listener.local_addr().unwrap().to_string();
        let status = std::sync::Arc::new(std::sync::Mutex::new("200 OK"));
        let served = status.clone();
        tokio::spawn(async move {
            while let Ok((mut s, _)) = listener.accept().await {
                let mut buf = [0u8; 512];
                let _ = s.read(&mut buf).await;
                let line = *served.lock().unwrap();
                let _ = s
                    .write_all(format!("HTTP/1.0 {line}\r\n\r\n").as_bytes())
                    .await;
            }
        });
        let (mut checks, mut rx) = Checks::new();
        checks.sync(&BTreeMap::from([(
            "web".to_string(),
            check(Probe::Http {
                authority,
                path: "/healthz".into(),
            }),
        )]));
        assert!(next(&mut rx).await.passing);
        *status.lock().unwrap() = "503 Service Unavailable";
        let c = next(&mut rx).await;
        assert!(!c.passing && c.detail.contains("503"), "{c:?}");
    }
}

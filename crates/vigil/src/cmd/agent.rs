//! `vigil agent`: a bare gossip member that announces nothing, for operators and tests.
//!
//! It joins a memberlist cluster (Go or vigil nodes), prints every membership event as a JSON
//! line on stdout, and serves an HTTP admin endpoint. SIGTERM or SIGINT make it leave
//! gracefully (bounded by `--leave-timeout`) and exit.

use super::parse_duration;
use clap::Parser;
use core::time::Duration;
use serde::Deserialize;
use serde_json::{Value, json};
use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use vigil_gossip::wire::Label;
use vigil_gossip::{Config, MemberInfo, MemberState, Profile};
use vigil_gossip_net::{Event, Memberlist, Options, parse_key, read_keyring_file};

/// Run a bare gossip member that announces nothing.
///
/// Prints one JSON object per line on stdout for every event, each with "ts" (RFC 3339, UTC)
/// and "event": ready, joined, join, update, suspect, alive (a suspect refuted), dead, left,
/// user, conflict, push_pull, keyring_reloaded, keyring_rejected, leaving, stopped.
///
/// Admin endpoint (--admin ADDR):
///   GET  /members            members as JSON
///   GET  /metrics            Prometheus text
///   POST /meta               body: new metadata
///   POST /broadcast          body: user message gossiped to everyone
///   POST /send?to=ADDR[&udp] body: user message to one node (TCP unless `udp`)
///   POST /join               body: seeds, one per line
///   POST /leave              leave gracefully (keeps running until SIGTERM)
///   POST /keyring/install    body: base64 key (likewise /keyring/use, /keyring/remove)
///
/// Settings come from flags, or from a TOML file (--config) with the same names
/// (name, bind, advertise, seeds, profile, keyring_file, keys, label, admin, meta,
/// leave_timeout, retry_join); flags win.
#[derive(Debug, Parser)]
#[command(verbatim_doc_comment)]
pub struct Args {
    /// TOML file with settings; flags override it.
    #[arg(long, short = 'c')]
    pub config: Option<PathBuf>,

    /// Node name (default: the host name).
    #[arg(long)]
    pub name: Option<String>,

    /// UDP and TCP address to listen on (default 0.0.0.0:7946; port 0 picks one).
    #[arg(long)]
    pub bind: Option<SocketAddr>,

    /// Address peers should use (required when binding 0.0.0.0 or ::).
    #[arg(long)]
    pub advertise: Option<SocketAddr>,

    /// A node to join through, `[name/]host[:port]`; repeat or separate with commas.
    #[arg(long = "seed", value_delimiter = ',')]
    pub seeds: Vec<String>,

    /// Gossip timings: lan, wan, local (Go memberlist's defaults) or fast (vigil's).
    #[arg(long)]
    pub profile: Option<Profile>,

    /// Keyring file: a JSON array of base64 keys, primary first; reloaded when it changes.
    #[arg(long)]
    pub keyring_file: Option<PathBuf>,

    /// An encryption key (base64, 16/24/32 bytes); repeat for more, the first is primary.
    #[arg(long = "key")]
    pub keys: Vec<String>,

    /// Cluster label (memberlist 0.3+; Go 0.2.2 nodes cannot join a labelled cluster).
    #[arg(long)]
    pub label: Option<String>,

    /// Address for the HTTP admin endpoint (off unless given).
    #[arg(long)]
    pub admin: Option<SocketAddr>,

    /// Node metadata (at most 512 bytes).
    #[arg(long)]
    pub meta: Option<String>,

    /// How long a graceful leave may take on SIGTERM or SIGINT.
    #[arg(long, value_parser = parse_duration)]
    pub leave_timeout: Option<Duration>,

    /// If no seed answers, try again after this long, until one does (default: one try).
    #[arg(long, value_parser = parse_duration)]
    pub retry_join: Option<Duration>,
}

/// The config file: the same settings as the flags.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileConfig {
    name: Option<String>,
    bind: Option<SocketAddr>,
    advertise: Option<SocketAddr>,
    #[serde(default)]
    seeds: Vec<String>,
    profile: Option<String>,
    keyring_file: Option<PathBuf>,
    #[serde(default)]
    keys: Vec<String>,
    label: Option<String>,
    admin: Option<SocketAddr>,
    meta: Option<String>,
    leave_timeout: Option<String>,
    retry_join: Option<String>,
}

/// Settings after merging the file and the flags.
struct Settings {
    options: Options,
    seeds: Vec<String>,
    admin: Option<SocketAddr>,
    leave_timeout: Duration,
    retry_join: Option<Duration>,
}

fn settings(args: Args) -> Result<Settings, String> {
    let file = match &args.config {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .map_err(|e| format!("cannot read config file {}: {e}", path.display()))?;
            toml::from_str::<FileConfig>(&text)
                .map_err(|e| format!("config file {}: {e}", path.display()))?
        }
        None => FileConfig::default(),
    };
    let name = match args.name.or(file.name) {
        Some(n) => n,
        None => hostname().ok_or("no --name given and the host name is unknown")?,
    };
    if name.is_empty() {
        return Err("--name must not be empty".into());
    }
    let bind = args
        .bind
        .or(file.bind)
        .unwrap_or_else(|| "0.0.0.0:7946".parse().expect("valid"));
    let profile = match args.profile {
        Some(p) => p,
        None => match file.profile {
            Some(p) => p.parse().map_err(|e| format!("config file: {e}"))?,
            None => Profile::Lan,
        },
    };
    let mut options = Options::new(name, bind);
    options.advertise = args.advertise.or(file.advertise);
    options.config = Config::profile(profile);
    if let Some(label) = args.label.or(file.label) {
        options.label =
            Label::new(label).map_err(|e| format!("--label: {e:?} (at most 255 bytes)"))?;
    }
    if let Some(meta) = args.meta.or(file.meta) {
        if meta.len() > 512 {
            return Err(format!("--meta: {} bytes; at most 512", meta.len()));
        }
        options.meta = meta.into_bytes();
    }
    let keys = if args.keys.is_empty() {
        file.keys
    } else {
        args.keys
    };
    for (i, k) in keys.iter().enumerate() {
        options
            .keys
            .push(parse_key(k).map_err(|e| format!("--key #{}: {e}", i + 1))?);
    }
    options.keyring_file = args.keyring_file.or(file.keyring_file);
    if let Some(path) = &options.keyring_file {
        if !options.keys.is_empty() {
            return Err("give either --key or --keyring-file, not both".into());
        }
        read_keyring_file(path).map_err(|e| e.to_string())?;
    }
    let leave_timeout = match (args.leave_timeout, file.leave_timeout) {
        (Some(d), _) => d,
        (None, Some(s)) => parse_duration(&s).map_err(|e| format!("config file: {e}"))?,
        (None, None) => Duration::from_secs(5),
    };
    let retry_join = match (args.retry_join, file.retry_join) {
        (Some(d), _) => Some(d),
        (None, Some(s)) => Some(parse_duration(&s).map_err(|e| format!("config file: {e}"))?),
        (None, None) => None,
    };
    if retry_join.is_some_and(|d| d.is_zero()) {
        return Err("--retry-join must be greater than zero".into());
    }
    let seeds = if args.seeds.is_empty() {
        file.seeds
    } else {
        args.seeds
    };
    Ok(Settings {
        options,
        seeds,
        admin: args.admin.or(file.admin),
        leave_timeout,
        retry_join,
    })
}

fn hostname() -> Option<String> {
    let h = std::fs::read_to_string("/proc/sys/kernel/hostname").ok()?;
    let h = h.trim();
    (!h.is_empty()).then(|| h.to_string())
}

/// Runs the agent until SIGTERM or SIGINT.
pub fn run(args: Args) -> ExitCode {
    let settings = match settings(args) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("vigil agent: {e}");
            return ExitCode::from(2);
        }
    };
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("vigil agent: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match rt.block_on(agent(settings)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("vigil agent: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Counters the agent keeps from events (the engine counts the rest).
#[derive(Default)]
struct AgentCounters {
    suspects_refuted: AtomicU64,
    user_msgs: AtomicU64,
}

async fn agent(s: Settings) -> Result<(), String> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate()).map_err(|e| e.to_string())?;
    let mut int = signal(SignalKind::interrupt()).map_err(|e| e.to_string())?;

    let (ml, mut events) = Memberlist::start(s.options)
        .await
        .map_err(|e| e.to_string())?;
    let counters = Arc::new(AgentCounters::default());
    let admin = match s.admin {
        Some(addr) => {
            let l = TcpListener::bind(addr)
                .await
                .map_err(|e| format!("cannot bind admin address {addr}: {e}"))?;
            let local = l.local_addr().map_err(|e| e.to_string())?;
            tokio::spawn(serve_admin(l, ml.clone(), counters.clone()));
            Some(local)
        }
        None => None,
    };
    emit(
        "ready",
        json!({
            "name": ml.name(),
            "bind": ml.local_addr().to_string(),
            "addr": ml.advertise_addr().to_string(),
            "admin": admin.map(|a| a.to_string()),
        }),
    );
    if !s.seeds.is_empty() {
        let ml = ml.clone();
        let seeds = s.seeds.clone();
        let retry = s.retry_join;
        tokio::spawn(async move {
            loop {
                match ml.join(&seeds).await {
                    Ok(n) => return emit("joined", json!({ "n": n })),
                    Err(e) => emit("joined", json!({ "n": 0, "error": e.to_string() })),
                }
                let Some(after) = retry else { return };
                tokio::time::sleep(after).await;
            }
        });
    }
    loop {
        tokio::select! {
            ev = events.recv() => match ev {
                Some(ev) => print_event(ev, &counters),
                None => return Err("the gossip driver stopped".into()),
            },
            _ = term.recv() => break,
            _ = int.recv() => break,
        }
    }
    emit("leaving", json!({}));
    let _ = ml.leave(s.leave_timeout).await;
    ml.shutdown().await;
    emit("stopped", json!({}));
    Ok(())
}

fn emit(event: &str, mut fields: Value) {
    if let Value::Object(map) = &mut fields {
        map.insert("ts".into(), Value::String(rfc3339_now()));
        map.insert("event".into(), Value::String(event.into()));
    }
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{fields}");
    let _ = out.flush();
}

fn state_name(s: MemberState) -> &'static str {
    match s {
        MemberState::Alive => "alive",
        MemberState::Suspect => "suspect",
        MemberState::Dead => "dead",
        MemberState::Left => "left",
        _ => "unknown",
    }
}

fn member_json(m: &MemberInfo) -> Value {
    json!({
        "node": &*m.name,
        "addr": m.addr.to_string(),
        "state": state_name(m.state),
        "incarnation": m.incarnation,
        "meta": m.meta.as_deref().map(String::from_utf8_lossy),
    })
}

fn print_event(ev: Event, counters: &AgentCounters) {
    use vigil_gossip::Event as E;
    let ev = match ev {
        Event::Gossip(e) => e,
        Event::KeyringReloaded { keys } => {
            return emit("keyring_reloaded", json!({ "keys": keys }));
        }
        Event::KeyringRejected(e) => {
            return emit("keyring_rejected", json!({ "error": e.to_string() }));
        }
        _ => return,
    };
    match ev {
        E::Join(m) => emit("join", member_json(&m)),
        E::Update(m) => emit("update", member_json(&m)),
        E::Suspect { member, from } => {
            let mut v = member_json(&member);
            v["from"] = Value::String(from.to_string());
            emit("suspect", v);
        }
        E::Refuted(m) => {
            counters.suspects_refuted.fetch_add(1, Ordering::Relaxed);
            emit("alive", member_json(&m));
        }
        E::Dead(m) => emit("dead", member_json(&m)),
        E::Left(m) => emit("left", member_json(&m)),
        E::UserMsg(msg) => {
            counters.user_msgs.fetch_add(1, Ordering::Relaxed);
            emit(
                "user",
                json!({ "msg": String::from_utf8_lossy(&msg), "len": msg.len() }),
            );
        }
        E::Conflict {
            existing,
            other_addr,
        } => {
            let mut v = member_json(&existing);
            v["other_addr"] = Value::String(other_addr.to_string());
            emit("conflict", v);
        }
        E::PushPullComplete { addr, join, ok } => emit(
            "push_pull",
            json!({ "addr": addr.to_string(), "join": join, "ok": ok }),
        ),
        E::LeaveComplete => emit("leave_complete", json!({})),
        _ => {}
    }
}

/// Formats the current time as RFC 3339 in UTC with microseconds.
fn rfc3339_now() -> String {
    let d = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    let secs = d.as_secs();
    let (days, rem) = (secs / 86_400, secs % 86_400);
    // Howard Hinnant's civil_from_days.
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:06}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60,
        d.subsec_micros()
    )
}

// ---- admin endpoint ------------------------------------------------------------------------

const MAX_HEAD: usize = 16 * 1024;
const MAX_BODY: usize = 64 * 1024;

struct Request {
    method: String,
    path: String,
    query: String,
    body: Vec<u8>,
}

async fn serve_admin(listener: TcpListener, ml: Memberlist, counters: Arc<AgentCounters>) {
    loop {
        let Ok((sock, _)) = listener.accept().await else {
            continue;
        };
        let (ml, counters) = (ml.clone(), counters.clone());
        tokio::spawn(async move {
            let _ =
                tokio::time::timeout(Duration::from_secs(10), handle_admin(sock, &ml, &counters))
                    .await;
        });
    }
}

async fn read_request(sock: &mut TcpStream) -> Option<Request> {
    let mut buf = Vec::with_capacity(1024);
    let head_end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i;
        }
        if buf.len() > MAX_HEAD || sock.read_buf(&mut buf).await.ok()? == 0 {
            return None;
        }
    };
    let head = std::str::from_utf8(&buf[..head_end]).ok()?;
    let mut lines = head.split("\r\n");
    let mut first = lines.next()?.split(' ');
    let method = first.next()?.to_string();
    let target = first.next()?;
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    let mut len = 0usize;
    for line in lines {
        if let Some((k, v)) = line.split_once(':')
            && k.trim().eq_ignore_ascii_case("content-length")
        {
            len = v.trim().parse().ok()?;
        }
    }
    if len > MAX_BODY {
        return None;
    }
    let mut body = buf[head_end + 4..].to_vec();
    while body.len() < len {
        if sock.read_buf(&mut body).await.ok()? == 0 {
            return None;
        }
    }
    body.truncate(len);
    Some(Request {
        method,
        path: path.to_string(),
        query: query.to_string(),
        body,
    })
}

async fn respond(sock: &mut TcpStream, status: &str, content_type: &str, body: &[u8]) {
    let head = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    let _ = sock.write_all(head.as_bytes()).await;
    let _ = sock.write_all(body).await;
    let _ = sock.shutdown().await;
}

async fn handle_admin(mut sock: TcpStream, ml: &Memberlist, counters: &AgentCounters) {
    let Some(req) = read_request(&mut sock).await else {
        return respond(&mut sock, "400 Bad Request", "text/plain", b"bad request\n").await;
    };
    let result = route(&req, ml, counters).await;
    match result {
        Ok((ctype, body)) => respond(&mut sock, "200 OK", ctype, &body).await,
        Err((status, msg)) => {
            let body = format!("{msg}\n");
            respond(&mut sock, status, "text/plain", body.as_bytes()).await;
        }
    }
}

type Routed = Result<(&'static str, Vec<u8>), (&'static str, String)>;

fn ok_text() -> Routed {
    Ok(("text/plain", b"ok\n".to_vec()))
}

fn bad(e: impl std::fmt::Display) -> (&'static str, String) {
    ("400 Bad Request", e.to_string())
}

async fn route(req: &Request, ml: &Memberlist, counters: &AgentCounters) -> Routed {
    let unavailable = |e: vigil_gossip_net::Error| ("503 Service Unavailable", e.to_string());
    let body = || String::from_utf8_lossy(&req.body).trim().to_string();
    match (req.method.as_str(), req.path.as_str()) {
        ("GET", "/members") => {
            let members = ml.members().await.map_err(unavailable)?;
            let list: Vec<Value> = members.iter().map(member_json).collect();
            Ok((
                "application/json",
                Value::Array(list).to_string().into_bytes(),
            ))
        }
        ("GET", "/metrics") => {
            let text = metrics(ml, counters).await.map_err(unavailable)?;
            Ok(("text/plain; version=0.0.4", text.into_bytes()))
        }
        ("POST", "/meta") => {
            ml.set_meta(req.body.clone()).await.map_err(bad)?;
            ok_text()
        }
        ("POST", "/broadcast") => {
            ml.broadcast_user(None, req.body.clone())
                .map_err(unavailable)?;
            ok_text()
        }
        ("POST", "/send") => {
            let mut to = None;
            let mut reliable = true;
            for pair in req.query.split('&') {
                match pair.split_once('=') {
                    Some(("to", v)) => to = Some(v.parse::<SocketAddr>().map_err(bad)?),
                    _ if pair == "udp" => reliable = false,
                    _ => {}
                }
            }
            let to = to.ok_or_else(|| bad("give ?to=ADDR"))?;
            ml.send_user(to, req.body.clone(), reliable)
                .map_err(unavailable)?;
            ok_text()
        }
        ("POST", "/join") => {
            let seeds: Vec<String> = body().lines().map(|l| l.trim().to_string()).collect();
            let n = ml.join(&seeds).await.map_err(bad)?;
            Ok(("text/plain", format!("{n}\n").into_bytes()))
        }
        ("POST", "/leave") => {
            ml.leave(Duration::from_secs(5))
                .await
                .map_err(unavailable)?;
            ok_text()
        }
        ("POST", "/keyring/install") => {
            let key = parse_key(&body()).map_err(bad)?;
            ml.install_key(key).map_err(unavailable)?;
            ok_text()
        }
        ("POST", "/keyring/use") | ("POST", "/keyring/remove") => {
            let key = parse_key(&body()).map_err(bad)?;
            let r = if req.path.ends_with("use") {
                ml.use_key(key.as_bytes()).await
            } else {
                ml.remove_key(key.as_bytes()).await
            };
            r.map_err(bad)?;
            ok_text()
        }
        (_, "/members" | "/metrics") => Err(("405 Method Not Allowed", "use GET".into())),
        _ => Err(("404 Not Found", "not found".into())),
    }
}

async fn metrics(
    ml: &Memberlist,
    counters: &AgentCounters,
) -> Result<String, vigil_gossip_net::Error> {
    use std::fmt::Write as _;
    let members = ml.members().await?;
    let st = ml.stats().await?;
    let e = &st.engine;
    let mut out = String::new();
    let mut by_state = [0u64; 4];
    for m in &members {
        let i = match m.state {
            MemberState::Alive => 0,
            MemberState::Suspect => 1,
            MemberState::Dead => 2,
            MemberState::Left => 3,
            _ => continue,
        };
        by_state[i] += 1;
    }
    let _ = writeln!(
        out,
        "# HELP vigil_gossip_members Members known, by state (this node included).\n# TYPE vigil_gossip_members gauge"
    );
    for (i, s) in ["alive", "suspect", "dead", "left"].iter().enumerate() {
        let _ = writeln!(out, "vigil_gossip_members{{state=\"{s}\"}} {}", by_state[i]);
    }
    let mut counter = |name: &str, help: &str, v: u64| {
        let _ = writeln!(
            out,
            "# HELP vigil_gossip_{name} {help}\n# TYPE vigil_gossip_{name} counter\nvigil_gossip_{name} {v}"
        );
    };
    counter("probes_total", "Probes started.", e.probes);
    counter(
        "probes_failed_total",
        "Probes that ended in a suspicion.",
        e.probes_failed,
    );
    counter(
        "suspicions_raised_total",
        "Suspicions this node raised.",
        e.suspicions_raised,
    );
    counter(
        "suspicions_refuted_total",
        "Suspect members seen to refute (suspect to alive).",
        counters.suspects_refuted.load(Ordering::Relaxed),
    );
    counter(
        "refutations_total",
        "Suspicions about this node that it refuted.",
        e.refutations,
    );
    counter(
        "deaths_declared_total",
        "Members this node declared dead.",
        e.deaths_declared,
    );
    counter(
        "packets_received_total",
        "UDP packets received.",
        e.packets_in,
    );
    counter("packets_sent_total", "UDP packets sent.", e.packets_out);
    counter("bytes_received_total", "UDP bytes received.", e.bytes_in);
    counter("bytes_sent_total", "UDP bytes sent.", e.bytes_out);
    counter(
        "decrypt_failures_total",
        "Packets and streams no key decrypted (or unencrypted when encryption is required).",
        e.decrypt_failures,
    );
    counter(
        "label_mismatches_total",
        "Packets and streams with a wrong or missing label.",
        e.label_mismatches,
    );
    counter(
        "malformed_total",
        "Packets, messages and streams dropped as malformed.",
        e.malformed,
    );
    counter("streams_in_total", "TCP streams served.", e.streams_in);
    counter("streams_out_total", "TCP streams opened.", e.streams_out);
    counter(
        "stream_failures_total",
        "Outgoing TCP streams that failed.",
        st.streams_failed,
    );
    counter(
        "streams_refused_total",
        "Outgoing TCP connections refused (strong evidence of death).",
        st.streams_refused,
    );
    counter(
        "udp_send_errors_total",
        "Datagrams the kernel refused to send.",
        st.udp_send_errors,
    );
    counter(
        "user_messages_total",
        "User messages received.",
        counters.user_msgs.load(Ordering::Relaxed),
    );
    counter(
        "keyring_reloads_total",
        "Keyring file reloads applied.",
        st.keyring_reloads,
    );
    counter(
        "keyring_errors_total",
        "Keyring file contents rejected.",
        st.keyring_errors,
    );
    let _ = writeln!(
        out,
        "# HELP vigil_gossip_health_score Lifeguard local health (0 is healthy).\n# TYPE vigil_gossip_health_score gauge\nvigil_gossip_health_score {}",
        st.health_score
    );
    let _ = writeln!(
        out,
        "# HELP vigil_gossip_incarnation This node's incarnation.\n# TYPE vigil_gossip_incarnation gauge\nvigil_gossip_incarnation {}",
        st.incarnation
    );
    Ok(out)
}

//! The agent's settings: flags, or a TOML file (`--config`) with the same names; flags win.
//! Everything is checked here, before anything starts.

use clap::Parser;
use core::time::Duration;
use serde::Deserialize;
use std::net::SocketAddr;
use std::path::PathBuf;
use vigil_gossip::wire::Label;
use vigil_gossip::{Config, Profile};
use vigil_gossip_net::{Options, parse_key, read_keyring_file};
use vigil_observe::AdminToken;

/// `vigil agent --help`: what it prints and serves, and who may use the admin routes.
pub const LONG_ABOUT: &str = "Run a bare gossip member that announces nothing.

Prints one JSON object per line on stdout for every event, each with \"ts\" (RFC 3339, UTC)
and \"event\": ready, joined, join, update, suspect, alive (a suspect refuted), dead, left,
user, conflict, push_pull, keyring_reloaded, keyring_rejected, leaving, stopped.

HTTP endpoint (--admin ADDR), open to anyone who can reach ADDR:
  GET  /members            members as JSON
  GET  /metrics            Prometheus text
  GET  /healthz            200 while the gossip driver answers
Admin routes: off (403) unless --admin-token-file is given, then they need the header
\"Authorization: Bearer <token>\" (401 otherwise):
  POST /meta               body: new metadata
  POST /broadcast          body: user message gossiped to everyone
  POST /send?to=ADDR[&udp] body: user message to one node (TCP unless `udp`)
  POST /join               body: seeds, one per line
  POST /leave              leave gracefully (keeps running until SIGTERM)
  POST /keyring/install    body: base64 key (likewise /keyring/use, /keyring/remove)

Settings come from flags, or from a TOML file (--config) with the same names (name, bind,
advertise, seeds, profile, keyring_file, keys, label, admin, admin_token_file, meta,
leave_timeout, retry_join); flags win.";

/// Run a bare gossip member that announces nothing (see [`LONG_ABOUT`]).
#[derive(Debug, Parser)]
#[command(long_about = LONG_ABOUT)]
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

    /// Address for the HTTP endpoint (off unless given).
    #[arg(long)]
    pub admin: Option<SocketAddr>,

    /// File holding the token that turns the admin routes on (at least 16 bytes; surrounding
    /// white space is ignored). Without it they answer 403.
    #[arg(long)]
    pub admin_token_file: Option<PathBuf>,

    /// Node metadata (at most 512 bytes).
    #[arg(long)]
    pub meta: Option<String>,

    /// How long a graceful leave may take on SIGTERM or SIGINT.
    #[arg(long, value_parser = crate::cmd::parse_duration)]
    pub leave_timeout: Option<Duration>,

    /// If no seed answers, try again after this long, until one does (default: one try).
    #[arg(long, value_parser = crate::cmd::parse_duration)]
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
    admin_token_file: Option<PathBuf>,
    meta: Option<String>,
    leave_timeout: Option<String>,
    retry_join: Option<String>,
}

/// The agent's settings after merging the file and the flags.
pub struct Settings {
    /// The gossip member's options (`keys` empty when a keyring file is given).
    pub options: Options,
    /// The keyring file, watched by the agent and applied with `Memberlist::set_keyring`.
    pub keyring_file: Option<PathBuf>,
    /// Nodes to join through.
    pub seeds: Vec<String>,
    /// Where to serve HTTP, if anywhere.
    pub admin: Option<SocketAddr>,
    /// The token that turns the admin routes on.
    pub admin_token: Option<AdminToken>,
    /// How long a graceful leave may take.
    pub leave_timeout: Duration,
    /// Retry joining after this long until a seed answers.
    pub retry_join: Option<Duration>,
}

impl Settings {
    /// Merges the config file (if any) and the flags, and checks everything.
    pub fn from_args(args: Args) -> Result<Self, String> {
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
            .unwrap_or(SocketAddr::from(([0, 0, 0, 0], 7946)));
        let profile = match (args.profile, file.profile) {
            (Some(p), _) => p,
            (None, Some(p)) => p.parse().map_err(|e| format!("config file: {e}"))?,
            (None, None) => Profile::Lan,
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
        let keyring_file = args.keyring_file.or(file.keyring_file);
        if let Some(path) = &keyring_file {
            if !options.keys.is_empty() {
                return Err("give either --key or --keyring-file, not both".into());
            }
            read_keyring_file(path).map_err(|e| e.to_string())?;
        }
        let admin = args.admin.or(file.admin);
        let admin_token = match args.admin_token_file.or(file.admin_token_file) {
            Some(_) if admin.is_none() => {
                return Err("--admin-token-file needs --admin (the address to serve on)".into());
            }
            Some(path) => {
                Some(AdminToken::read(&path).map_err(|e| format!("--admin-token-file: {e}"))?)
            }
            None => None,
        };
        let leave_timeout = duration(args.leave_timeout, file.leave_timeout, "leave_timeout")?
            .unwrap_or(Duration::from_secs(5));
        let retry_join = duration(args.retry_join, file.retry_join, "retry_join")?;
        if retry_join.is_some_and(|d| d.is_zero()) {
            return Err("--retry-join must be greater than zero".into());
        }
        let seeds = if args.seeds.is_empty() {
            file.seeds
        } else {
            args.seeds
        };
        Ok(Self {
            options,
            keyring_file,
            seeds,
            admin,
            admin_token,
            leave_timeout,
            retry_join,
        })
    }
}

/// A duration from the flag, else from the file's `field`.
fn duration(
    flag: Option<Duration>,
    file: Option<String>,
    field: &str,
) -> Result<Option<Duration>, String> {
    match (flag, file) {
        (Some(d), _) => Ok(Some(d)),
        (None, Some(s)) => crate::cmd::parse_duration(&s)
            .map(Some)
            .map_err(|e| format!("config file: {field}: {e}")),
        (None, None) => Ok(None),
    }
}

fn hostname() -> Option<String> {
    let h = std::fs::read_to_string("/proc/sys/kernel/hostname").ok()?;
    let h = h.trim();
    (!h.is_empty()).then(|| h.to_string())
}

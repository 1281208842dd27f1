//! `vigil keygen`: a new keyring file with one random AES-256 key, in the format
//! `gossip.keyring_file` reads (a JSON array of base64 keys, primary first, as Serf and Consul
//! write them).

use base64::Engine as _;
use clap::Parser;
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::PathBuf;
use std::process::ExitCode;

/// Write a new gossip keyring file holding one random 32-byte key.
#[derive(Debug, Parser)]
pub struct Args {
    /// The file to write (mode 0600); without it the keyring goes to stdout.
    #[arg(long, short = 'o')]
    pub out: Option<PathBuf>,

    /// Replace the file if it exists.
    #[arg(long)]
    pub force: bool,
}

/// The keyring text for one new random key.
pub fn new_keyring() -> Result<String, getrandom::Error> {
    let mut key = [0u8; 32];
    getrandom::getrandom(&mut key)?;
    let b64 = base64::engine::general_purpose::STANDARD.encode(key);
    Ok(format!("[\"{b64}\"]\n"))
}

/// Runs `vigil keygen`.
pub fn run(args: Args) -> ExitCode {
    let text = match new_keyring() {
        Ok(t) => t,
        Err(e) => {
            eprintln!("vigil keygen: no OS randomness: {e}");
            return ExitCode::FAILURE;
        }
    };
    let Some(path) = args.out else {
        print!("{text}");
        return ExitCode::SUCCESS;
    };
    let mut open = std::fs::OpenOptions::new();
    open.write(true).mode(0o600);
    if args.force {
        open.create(true).truncate(true);
    } else {
        open.create_new(true);
    }
    let written = open
        .open(&path)
        .and_then(|mut f| f.write_all(text.as_bytes()).and_then(|()| f.sync_all()));
    match written {
        Ok(()) => {
            eprintln!("wrote a new keyring to {}", path.display());
            ExitCode::SUCCESS
        }
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            eprintln!(
                "vigil keygen: {} exists (use --force to replace it)",
                path.display()
            );
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("vigil keygen: {}: {e}", path.display());
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keyrings_are_readable_by_gossip_net_and_differ() {
        let dir = std::env::temp_dir().join(format!("vigil-keygen-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("keyring.json");
        let a = new_keyring().unwrap();
        std::fs::write(&path, &a).unwrap();
        let keys = vigil_gossip_net::read_keyring_file(&path).unwrap();
        assert_eq!(keys.len(), 1);
        assert_ne!(a, new_keyring().unwrap());
        let _ = std::fs::remove_dir_all(&dir);
    }
}

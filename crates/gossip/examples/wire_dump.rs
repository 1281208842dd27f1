//! A small command-line window on the codec, used by the README's demo.
//!
//! ```text
//! wire_dump open <packet-hex> [key-hex] [label]     peel a UDP packet and print its messages
//! wire_dump seal-alive <name> <ip> <port> [key-hex] [label]
//!                                                   print a sealed alive packet as hex
//! ```

use rand::SeedableRng;
use rand::rngs::StdRng;
use std::process::exit;
use vigil_gossip::wire::{self, Alive, Framing, Keyring, Label, Message, SecretKey, Transport};

fn framing(key: Option<&String>, label: Option<&String>) -> Result<Framing, String> {
    let keyring = match key {
        Some(k) if !k.is_empty() => {
            let bytes = hex::decode(k).map_err(|e| format!("key: not hex: {e}"))?;
            Keyring::new(SecretKey::new(&bytes).map_err(|e| format!("key: {e}"))?, [])
        }
        _ => Keyring::default(),
    };
    let label =
        Label::new(label.cloned().unwrap_or_default()).map_err(|e| format!("label: {e}"))?;
    Ok(Framing {
        keyring,
        label,
        ..Framing::default()
    })
}

fn run(args: &[String]) -> Result<(), String> {
    match args.first().map(String::as_str) {
        Some("open") => {
            let hex_in = args.get(1).ok_or("open: missing packet hex")?;
            let bytes = hex::decode(hex_in.trim()).map_err(|e| format!("packet: not hex: {e}"))?;
            let framing = framing(args.get(2), args.get(3))?;
            let contents = wire::packet::open(&framing, &bytes).map_err(|e| format!("rejected: {e}"))?;
            println!("layers: {:?}", contents.layers);
            for m in &contents.messages {
                println!("  {m:?}");
            }
            for e in &contents.malformed {
                println!("  malformed part: {e}");
            }
            Ok(())
        }
        Some("seal-alive") => {
            let [name, ip, port] = [1, 2, 3].map(|i| args.get(i));
            let (Some(name), Some(ip), Some(port)) = (name, ip, port) else {
                return Err("seal-alive: need <name> <ip> <port>".into());
            };
            let ip: std::net::IpAddr = ip.parse().map_err(|e| format!("ip: {e}"))?;
            let port: u16 = port.parse().map_err(|e| format!("port: {e}"))?;
            let alive = Message::Alive(Alive {
                incarnation: 1,
                node: name.clone(),
                addr: Some(wire::ip_to_wire(ip)),
                port,
                meta: None,
                vsn: Some(vec![1, 5, 2, 0, 0, 0]),
            });
            let framing = framing(args.get(4), args.get(5))?;
            let mut out = Vec::new();
            let mut rng = StdRng::seed_from_u64(u64::from(port));
            wire::packet::seal(&framing, &alive.to_vec(Transport::Packet), true, &mut rng, &mut out);
            println!("{}", hex::encode(out));
            Ok(())
        }
        _ => Err("usage: wire_dump open <hex> [key-hex] [label] | seal-alive <name> <ip> <port> [key-hex] [label]".into()),
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if let Err(e) = run(&args) {
        eprintln!("wire_dump: {e}");
        exit(2);
    }
}

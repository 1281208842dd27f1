//! Shared fixtures for the fuzz targets in `fuzz_targets/`: the framings every input is run
//! under, and a deterministic RNG for GCM nonces.
//!
//! The keys and labels match the ones in `tests/vectors/memberlist/vectors.json`, so the seeded
//! corpus holds packets and streams that really decrypt under these framings.

use rand::SeedableRng;
use rand::rngs::StdRng;
use std::sync::LazyLock;
use vigil_gossip::wire::{EncryptionVersion, Framing, Keyring, Label, SecretKey, StreamLimits};

/// Key bytes `00 01 02 ... 1f`; the vectors use the first 16, 24 or 32 of them.
const KEY_BYTES: [u8; 32] = {
    let mut k = [0u8; 32];
    let mut i = 0;
    while i < 32 {
        k[i] = i as u8;
        i += 1;
    }
    k
};

/// The AES key of the given size (16, 24 or 32) used throughout the vectors.
pub fn key(len: usize) -> SecretKey {
    SecretKey::new(&KEY_BYTES[..len]).expect("16, 24 or 32 bytes")
}

/// Stream caps far below Go's (40 MiB decompressed) so that compression bombs stay cheap in
/// most framings; the plain framings keep the real defaults.
pub const SMALL_LIMITS: StreamLimits = StreamLimits {
    max_push_pull_nodes: 4096,
    max_user_bytes: 1 << 20,
    max_encrypted_bytes: 1 << 20,
    max_decompressed_bytes: 1 << 20,
};

/// A framing with a name for assertion messages.
pub struct Named {
    /// Shown when an assertion fails.
    pub name: &'static str,
    /// The framing itself.
    pub framing: Framing,
}

/// Every framing an input is opened under.
pub static FRAMINGS: LazyLock<Vec<Named>> = LazyLock::new(|| {
    let label = |s: &str| Label::new(s).expect("short label");
    let small = |f: Framing| Framing {
        stream_limits: SMALL_LIMITS,
        ..f
    };
    vec![
        Named {
            name: "plain",
            framing: Framing::default(),
        },
        Named {
            name: "plain-uncompressed",
            framing: Framing {
                compress: false,
                ..Framing::default()
            },
        },
        Named {
            name: "aes128-v1",
            framing: small(Framing {
                keyring: Keyring::new(key(16), []),
                ..Framing::default()
            }),
        },
        Named {
            name: "keyring-v0-verify_incoming=false",
            framing: small(Framing {
                keyring: Keyring::new(key(32), [key(16), key(24)]),
                encryption_version: EncryptionVersion::V0,
                verify_incoming: false,
                ..Framing::default()
            }),
        },
        Named {
            name: "label-vigil",
            framing: small(Framing {
                label: label("vigil"),
                ..Framing::default()
            }),
        },
        Named {
            name: "label-vigil-aes128",
            framing: small(Framing {
                label: label("vigil"),
                keyring: Keyring::new(key(16), [key(24)]),
                compress: false,
                ..Framing::default()
            }),
        },
        Named {
            name: "label-prod-cluster-keyring",
            framing: small(Framing {
                label: label("prod-cluster"),
                keyring: Keyring::new(key(32), [key(16)]),
                ..Framing::default()
            }),
        },
        Named {
            name: "skip-inbound-label-check",
            framing: small(Framing {
                label: label("vigil"),
                skip_inbound_label_check: true,
                ..Framing::default()
            }),
        },
    ]
});

/// A fresh RNG with a fixed seed, so that a reproducer replays the same nonces.
pub fn rng() -> StdRng {
    StdRng::seed_from_u64(0x5eed_f022)
}

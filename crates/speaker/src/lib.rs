//! The vigil speaker as a library, shared by every mode (standalone YAML, Kubernetes).
//!
//! A mode turns its configuration into [`model::StaticSettings`] (restart-only) and a stream
//! of whole [`model::DesiredState`] snapshots; the speaker does the rest. The decisions live in
//! the sans-IO `vigil-speaker-core`, re-exported here as [`model`] (and, as it lands, `core`).

pub use vigil_speaker_core::model;

//! The vigil speaker as a library, shared by every mode (standalone YAML, Kubernetes).
//!
//! A mode turns its configuration into [`model::StaticSettings`] (restart-only) and a stream
//! of whole [`model::DesiredState`] snapshots; the speaker does the rest. The decisions live in
//! the sans-IO `vigil-speaker-core` ([`core::SpeakerCore`]), re-exported here.

pub use vigil_speaker_core::{core, model};

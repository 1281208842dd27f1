//! A gossip member as the speaker sees it: name, address, state and what it published.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::net::SocketAddr;
use vigil_gossip::MemberInfo;
use vigil_lb::{NodeMeta, NodeView};

/// A member's gossip state, as the speaker acts on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MemberState {
    /// Answering probes.
    Alive,
    /// Missed a probe and not yet refuted; still a candidate, as in MetalLB.
    Suspect,
    /// Declared dead.
    Dead,
    /// Left gracefully.
    Left,
    /// A state the gossip engine added later: not a candidate until we know what it means.
    #[serde(other)]
    Unknown,
}

impl MemberState {
    /// Alive or suspect: a candidate for the election.
    pub fn is_live(self) -> bool {
        matches!(self, Self::Alive | Self::Suspect)
    }

    /// The lowercase name used in `/status` and logs.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Alive => "alive",
            Self::Suspect => "suspect",
            Self::Dead => "dead",
            Self::Left => "left",
            Self::Unknown => "unknown",
        }
    }
}

impl fmt::Display for MemberState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl From<vigil_gossip::MemberState> for MemberState {
    fn from(state: vigil_gossip::MemberState) -> Self {
        match state {
            vigil_gossip::MemberState::Alive => Self::Alive,
            vigil_gossip::MemberState::Suspect => Self::Suspect,
            vigil_gossip::MemberState::Dead => Self::Dead,
            vigil_gossip::MemberState::Left => Self::Left,
            _ => Self::Unknown,
        }
    }
}

/// What kind of membership event made the speaker look again (counted per kind in metrics).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum MemberEventKind {
    /// A member joined, or came back from dead or left.
    Join,
    /// A member's metadata changed.
    Update,
    /// A member became suspect.
    Suspect,
    /// A suspect member refuted the suspicion.
    Refuted,
    /// A member was declared dead.
    Dead,
    /// A member left gracefully.
    Left,
}

impl MemberEventKind {
    /// Every kind, in the order metrics list them.
    pub const ALL: [Self; 6] = [
        Self::Join,
        Self::Update,
        Self::Suspect,
        Self::Refuted,
        Self::Dead,
        Self::Left,
    ];

    /// The kind of a gossip event, if it is a membership event.
    pub fn of(event: &vigil_gossip::Event) -> Option<Self> {
        use vigil_gossip::Event as E;
        Some(match event {
            E::Join(_) => Self::Join,
            E::Update(_) => Self::Update,
            E::Suspect { .. } => Self::Suspect,
            E::Refuted(_) => Self::Refuted,
            E::Dead(_) => Self::Dead,
            E::Left(_) => Self::Left,
            _ => return None,
        })
    }

    /// The name in logs and metric labels (`alive` for a refutation, MetalLB's wording).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Join => "join",
            Self::Update => "update",
            Self::Suspect => "suspect",
            Self::Refuted => "alive",
            Self::Dead => "dead",
            Self::Left => "left",
        }
    }
}

impl fmt::Display for MemberEventKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A gossip member.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Member {
    /// Its gossip name.
    pub name: String,
    /// Its gossip address.
    pub addr: SocketAddr,
    /// Its state.
    pub state: MemberState,
    /// Its published metadata (the default for foreign or absent metadata).
    pub meta: NodeMeta,
}

impl Member {
    /// Alive or suspect: a candidate, as in MetalLB.
    pub fn live(&self) -> bool {
        self.state.is_live()
    }

    /// The election's view of it.
    pub(crate) fn view(&self) -> NodeView {
        NodeView {
            name: self.name.clone(),
            live: self.live(),
            meta: self.meta.clone(),
        }
    }
}

impl From<&MemberInfo> for Member {
    fn from(m: &MemberInfo) -> Self {
        Self {
            name: m.name.to_string(),
            addr: m.addr,
            state: m.state.into(),
            meta: NodeMeta::decode(m.meta.as_deref().unwrap_or_default()),
        }
    }
}

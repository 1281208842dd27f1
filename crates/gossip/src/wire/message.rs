//! memberlist's messages: a type byte followed by a MessagePack body.
//!
//! Each struct mirrors a Go struct field for field. Bodies are written as maps keyed by the Go
//! field names in byte-wise sorted order (what go-msgpack does), and read from maps in any order
//! or from arrays in Go's declaration order.

use super::DecodeError;
use super::msgpack::{self, Reader};

macro_rules! message_types {
    ($($(#[$doc:meta])* $name:ident = $value:literal,)*) => {
        /// The first byte of every memberlist message. Values are wire constants.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        #[non_exhaustive]
        pub enum MessageType {
            $($(#[$doc])* $name,)*
            /// A value memberlist does not define.
            Unknown(u8),
        }

        impl From<u8> for MessageType {
            fn from(b: u8) -> Self {
                match b {
                    $($value => Self::$name,)*
                    other => Self::Unknown(other),
                }
            }
        }

        impl From<MessageType> for u8 {
            fn from(t: MessageType) -> u8 {
                match t {
                    $(MessageType::$name => $value,)*
                    MessageType::Unknown(other) => other,
                }
            }
        }
    };
}

message_types! {
    /// `pingMsg`: a direct probe.
    Ping = 0,
    /// `indirectPingMsg`: ask a helper to probe a target for us.
    IndirectPing = 1,
    /// `ackRespMsg`: a probe succeeded.
    Ack = 2,
    /// `suspectMsg`: gossip that a node is suspected.
    Suspect = 3,
    /// `aliveMsg`: gossip that a node is alive (also how nodes join).
    Alive = 4,
    /// `deadMsg`: gossip that a node is dead, or has left when `From == Node`.
    Dead = 5,
    /// `pushPullMsg`: full-state exchange over TCP.
    PushPull = 6,
    /// `compoundMsg`: several messages in one packet.
    Compound = 7,
    /// `userMsg`: an application message.
    User = 8,
    /// `compressMsg`: an LZW-compressed message.
    Compress = 9,
    /// `encryptMsg`: an encrypted stream (TCP only; UDP encryption has no type byte).
    Encrypt = 10,
    /// `nackRespMsg`: an indirect probe's helper heard nothing from the target.
    Nack = 11,
    /// `hasCrcMsg`: a CRC-32 precedes the message (protocol version 5).
    HasCrc = 12,
    /// `errMsg`: the far end of a stream reports an error.
    Err = 13,
    /// `hasLabelMsg`: a cluster label precedes the packet or stream (memberlist 0.3.0+).
    HasLabel = 244,
}

/// A node's state as carried in push/pull (`NodeStateType`, a Go `int`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum NodeState {
    /// 0
    Alive,
    /// 1
    Suspect,
    /// 2
    Dead,
    /// 3: left gracefully.
    Left,
    /// Any other value; Go ignores such entries when merging.
    Unknown(i64),
}

impl From<i64> for NodeState {
    fn from(v: i64) -> Self {
        match v {
            0 => Self::Alive,
            1 => Self::Suspect,
            2 => Self::Dead,
            3 => Self::Left,
            other => Self::Unknown(other),
        }
    }
}

impl From<NodeState> for i64 {
    fn from(s: NodeState) -> Self {
        match s {
            NodeState::Alive => 0,
            NodeState::Suspect => 1,
            NodeState::Dead => 2,
            NodeState::Left => 3,
            NodeState::Unknown(v) => v,
        }
    }
}

/// `ping`: a direct probe. The target answers only if `node` is empty or its own name.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Ping {
    /// Sequence number echoed by the ack.
    pub seq_no: u32,
    /// The name of the node we mean to probe (protects against a restarted process under a
    /// different name at the same address).
    pub node: String,
    /// Where to send the ack (4 or 16 bytes); empty means "the packet's source". Omitted on the
    /// wire when empty.
    pub source_addr: Vec<u8>,
    /// Port for the ack; 0 means absent.
    pub source_port: u16,
    /// The prober's name; empty means absent.
    pub source_node: String,
}

/// `indirectPingReq`: ask a helper to probe `target` and relay the ack.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct IndirectPing {
    /// The originator's sequence number, echoed in the relayed ack or nack.
    pub seq_no: u32,
    /// Target IP, 4 or 16 bytes; `None` is Go's nil.
    pub target: Option<Vec<u8>>,
    /// Target port.
    pub port: u16,
    /// Target name.
    pub node: String,
    /// Whether the originator wants a nack if the target stays silent (protocol 4+).
    pub nack: bool,
    /// See [`Ping::source_addr`].
    pub source_addr: Vec<u8>,
    /// See [`Ping::source_port`].
    pub source_port: u16,
    /// See [`Ping::source_node`].
    pub source_node: String,
}

/// `ackResp`: the answer to a ping.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Ack {
    /// The ping's sequence number.
    pub seq_no: u32,
    /// Application payload (`PingDelegate.AckPayload`); `None` is Go's nil.
    pub payload: Option<Vec<u8>>,
}

/// `nackResp`: a helper's "the target did not answer me".
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Nack {
    /// The originator's sequence number.
    pub seq_no: u32,
}

/// `errResp`: an error reported over a stream.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ErrResp {
    /// Go's error text.
    pub error: String,
}

/// `suspect`: `from` suspects `node` at `incarnation`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Suspect {
    /// The accused's incarnation as the accuser knows it.
    pub incarnation: u32,
    /// The accused.
    pub node: String,
    /// The accuser.
    pub from: String,
}

/// `alive`: `node` is alive at `incarnation`, reachable at `addr:port`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Alive {
    /// The node's incarnation.
    pub incarnation: u32,
    /// The node's name.
    pub node: String,
    /// Its IP exactly as it advertises it (4 or 16 bytes); peers compare these bytes. `None`
    /// is Go's nil.
    pub addr: Option<Vec<u8>>,
    /// Its gossip port.
    pub port: u16,
    /// Application metadata; `None` is Go's nil.
    pub meta: Option<Vec<u8>>,
    /// `[pmin, pmax, pcur, dmin, dmax, dcur]`, normally 6 bytes; `None` is Go's nil.
    pub vsn: Option<Vec<u8>>,
}

/// `dead`: `from` declares `node` dead; when `from == node` the node has left.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Dead {
    /// The incarnation being declared dead.
    pub incarnation: u32,
    /// The dead or departing node.
    pub node: String,
    /// The declarer.
    pub from: String,
}

/// `pushPullHeader`: what follows a push/pull type byte.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PushPullHeader {
    /// Number of [`PushNodeState`]s that follow (a Go `int`).
    pub nodes: i64,
    /// Bytes of application state after the node states (a Go `int`).
    pub user_state_len: i64,
    /// Whether this exchange is a join.
    pub join: bool,
}

/// `pushNodeState`: one member as seen by the sender of a push/pull.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PushNodeState {
    /// Member name.
    pub name: String,
    /// Member IP bytes, as the member advertised them; `None` is Go's nil.
    pub addr: Option<Vec<u8>>,
    /// Member port.
    pub port: u16,
    /// Member metadata; `None` is Go's nil.
    pub meta: Option<Vec<u8>>,
    /// Member incarnation.
    pub incarnation: u32,
    /// Member state.
    pub state: NodeState,
    /// Member protocol versions; `None` is Go's nil.
    pub vsn: Option<Vec<u8>>,
}

/// A whole push/pull message: header, node states and application state.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PushPull {
    /// Whether this exchange is a join.
    pub join: bool,
    /// Every member the sender knows, in any state.
    pub states: Vec<PushNodeState>,
    /// `Delegate.LocalState`, opaque to memberlist.
    pub user_state: Vec<u8>,
}

/// `userMsgHeader`: precedes a user message on a stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct UserMsgHeader {
    /// Length of the raw message that follows (a Go `int`).
    pub user_msg_len: i64,
}

/// `compress`: a compressed message.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Compress {
    /// 0 = LZW, the only algorithm.
    pub algo: u8,
    /// The compressed bytes.
    pub buf: Vec<u8>,
}

/// One decoded message (framing layers such as compound, compress, CRC and encryption are
/// handled by [`packet`](super::packet) and [`stream`](super::stream)).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Message {
    /// `pingMsg`
    Ping(Ping),
    /// `indirectPingMsg`
    IndirectPing(IndirectPing),
    /// `ackRespMsg`
    Ack(Ack),
    /// `nackRespMsg`
    Nack(Nack),
    /// `suspectMsg`
    Suspect(Suspect),
    /// `aliveMsg`
    Alive(Alive),
    /// `deadMsg`
    Dead(Dead),
    /// `pushPullMsg` (streams only)
    PushPull(PushPull),
    /// `userMsg`: raw on UDP, with a length header on streams.
    User(Vec<u8>),
    /// `errMsg` (streams only)
    Err(ErrResp),
}

/// The two forms of a message: UDP packets and TCP streams differ for user messages, and each
/// carries only some message types.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    /// A UDP packet (or a part of a compound).
    Packet,
    /// A TCP stream.
    Stream,
}

// ---- field-level helpers -------------------------------------------------------------------

fn nonempty(b: &[u8]) -> usize {
    usize::from(!b.is_empty())
}

/// The optional reply-to fields of `ping` and `indirectPingReq` (all `omitempty`), which sort
/// next to each other in both.
fn source_fields(addr: &[u8], node: &str, port: u16) -> usize {
    nonempty(addr) + nonempty(node.as_bytes()) + usize::from(port != 0)
}

fn encode_source(out: &mut Vec<u8>, addr: &[u8], node: &str, port: u16) {
    if !addr.is_empty() {
        msgpack::write_key(out, "SourceAddr");
        msgpack::write_raw(out, addr);
    }
    if !node.is_empty() {
        msgpack::write_key(out, "SourceNode");
        msgpack::write_raw(out, node.as_bytes());
    }
    if port != 0 {
        msgpack::write_key(out, "SourcePort");
        msgpack::write_uint(out, port.into());
    }
}

// ---- per-struct bodies ---------------------------------------------------------------------

impl Ping {
    const DECLARED: &'static [&'static str] =
        &["SeqNo", "Node", "SourceAddr", "SourcePort", "SourceNode"];

    fn encode_body(&self, out: &mut Vec<u8>) {
        let n = 2 + source_fields(&self.source_addr, &self.source_node, self.source_port);
        msgpack::write_map_len(out, n);
        msgpack::write_key(out, "Node");
        msgpack::write_raw(out, self.node.as_bytes());
        msgpack::write_key(out, "SeqNo");
        msgpack::write_uint(out, self.seq_no.into());
        encode_source(out, &self.source_addr, &self.source_node, self.source_port);
    }

    fn decode_body(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let mut m = Self::default();
        r.read_struct(Self::DECLARED, |key, r| {
            match key {
                b"SeqNo" => m.seq_no = r.u32()?,
                b"Node" => m.node = r.string()?,
                b"SourceAddr" => m.source_addr = r.bytes()?.unwrap_or_default(),
                b"SourcePort" => m.source_port = r.u16()?,
                b"SourceNode" => m.source_node = r.string()?,
                _ => return Ok(false),
            }
            Ok(true)
        })?;
        Ok(m)
    }
}

impl IndirectPing {
    const DECLARED: &'static [&'static str] = &[
        "SeqNo",
        "Target",
        "Port",
        "Node",
        "Nack",
        "SourceAddr",
        "SourcePort",
        "SourceNode",
    ];

    fn encode_body(&self, out: &mut Vec<u8>) {
        let n = 5 + source_fields(&self.source_addr, &self.source_node, self.source_port);
        msgpack::write_map_len(out, n);
        msgpack::write_key(out, "Nack");
        msgpack::write_bool(out, self.nack);
        msgpack::write_key(out, "Node");
        msgpack::write_raw(out, self.node.as_bytes());
        msgpack::write_key(out, "Port");
        msgpack::write_uint(out, self.port.into());
        msgpack::write_key(out, "SeqNo");
        msgpack::write_uint(out, self.seq_no.into());
        encode_source(out, &self.source_addr, &self.source_node, self.source_port);
        msgpack::write_key(out, "Target");
        msgpack::write_opt_raw(out, self.target.as_deref());
    }

    fn decode_body(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let mut m = Self::default();
        r.read_struct(Self::DECLARED, |key, r| {
            match key {
                b"SeqNo" => m.seq_no = r.u32()?,
                b"Target" => m.target = r.bytes()?,
                b"Port" => m.port = r.u16()?,
                b"Node" => m.node = r.string()?,
                b"Nack" => m.nack = r.bool()?,
                b"SourceAddr" => m.source_addr = r.bytes()?.unwrap_or_default(),
                b"SourcePort" => m.source_port = r.u16()?,
                b"SourceNode" => m.source_node = r.string()?,
                _ => return Ok(false),
            }
            Ok(true)
        })?;
        Ok(m)
    }
}

impl Ack {
    const DECLARED: &'static [&'static str] = &["SeqNo", "Payload"];

    fn encode_body(&self, out: &mut Vec<u8>) {
        msgpack::write_map_len(out, 2);
        msgpack::write_key(out, "Payload");
        msgpack::write_opt_raw(out, self.payload.as_deref());
        msgpack::write_key(out, "SeqNo");
        msgpack::write_uint(out, self.seq_no.into());
    }

    fn decode_body(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let mut m = Self::default();
        r.read_struct(Self::DECLARED, |key, r| {
            match key {
                b"SeqNo" => m.seq_no = r.u32()?,
                b"Payload" => m.payload = r.bytes()?,
                _ => return Ok(false),
            }
            Ok(true)
        })?;
        Ok(m)
    }
}

impl Nack {
    fn encode_body(&self, out: &mut Vec<u8>) {
        msgpack::write_map_len(out, 1);
        msgpack::write_key(out, "SeqNo");
        msgpack::write_uint(out, self.seq_no.into());
    }

    fn decode_body(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let seq_no = r
            .read_single_field("SeqNo", Reader::u32)?
            .unwrap_or_default();
        Ok(Self { seq_no })
    }
}

impl ErrResp {
    fn encode_body(&self, out: &mut Vec<u8>) {
        msgpack::write_map_len(out, 1);
        msgpack::write_key(out, "Error");
        msgpack::write_raw(out, self.error.as_bytes());
    }

    fn decode_body(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let error = r
            .read_single_field("Error", Reader::string)?
            .unwrap_or_default();
        Ok(Self { error })
    }
}

/// `suspect` and `dead` share their shape: `{From, Incarnation, Node}`.
fn encode_accusation(out: &mut Vec<u8>, incarnation: u32, node: &str, from: &str) {
    msgpack::write_map_len(out, 3);
    msgpack::write_key(out, "From");
    msgpack::write_raw(out, from.as_bytes());
    msgpack::write_key(out, "Incarnation");
    msgpack::write_uint(out, incarnation.into());
    msgpack::write_key(out, "Node");
    msgpack::write_raw(out, node.as_bytes());
}

fn decode_accusation(r: &mut Reader<'_>) -> Result<(u32, String, String), DecodeError> {
    let (mut incarnation, mut node, mut from) = (0, String::new(), String::new());
    r.read_struct(&["Incarnation", "Node", "From"], |key, r| {
        match key {
            b"Incarnation" => incarnation = r.u32()?,
            b"Node" => node = r.string()?,
            b"From" => from = r.string()?,
            _ => return Ok(false),
        }
        Ok(true)
    })?;
    Ok((incarnation, node, from))
}

impl Alive {
    const DECLARED: &'static [&'static str] =
        &["Incarnation", "Node", "Addr", "Port", "Meta", "Vsn"];

    fn encode_body(&self, out: &mut Vec<u8>) {
        msgpack::write_map_len(out, 6);
        msgpack::write_key(out, "Addr");
        msgpack::write_opt_raw(out, self.addr.as_deref());
        msgpack::write_key(out, "Incarnation");
        msgpack::write_uint(out, self.incarnation.into());
        msgpack::write_key(out, "Meta");
        msgpack::write_opt_raw(out, self.meta.as_deref());
        msgpack::write_key(out, "Node");
        msgpack::write_raw(out, self.node.as_bytes());
        msgpack::write_key(out, "Port");
        msgpack::write_uint(out, self.port.into());
        msgpack::write_key(out, "Vsn");
        msgpack::write_opt_raw(out, self.vsn.as_deref());
    }

    fn decode_body(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let mut m = Self::default();
        r.read_struct(Self::DECLARED, |key, r| {
            match key {
                b"Incarnation" => m.incarnation = r.u32()?,
                b"Node" => m.node = r.string()?,
                b"Addr" => m.addr = r.bytes()?,
                b"Port" => m.port = r.u16()?,
                b"Meta" => m.meta = r.bytes()?,
                b"Vsn" => m.vsn = r.bytes()?,
                _ => return Ok(false),
            }
            Ok(true)
        })?;
        Ok(m)
    }
}

impl PushPullHeader {
    const DECLARED: &'static [&'static str] = &["Nodes", "UserStateLen", "Join"];

    /// Appends the msgpack body (no type byte).
    pub fn encode_body(&self, out: &mut Vec<u8>) {
        msgpack::write_map_len(out, 3);
        msgpack::write_key(out, "Join");
        msgpack::write_bool(out, self.join);
        msgpack::write_key(out, "Nodes");
        msgpack::write_int(out, self.nodes);
        msgpack::write_key(out, "UserStateLen");
        msgpack::write_int(out, self.user_state_len);
    }

    fn decode_body(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let mut m = Self::default();
        r.read_struct(Self::DECLARED, |key, r| {
            match key {
                b"Nodes" => m.nodes = r.int()?,
                b"UserStateLen" => m.user_state_len = r.int()?,
                b"Join" => m.join = r.bool()?,
                _ => return Ok(false),
            }
            Ok(true)
        })?;
        Ok(m)
    }
}

impl PushNodeState {
    const DECLARED: &'static [&'static str] = &[
        "Name",
        "Addr",
        "Port",
        "Meta",
        "Incarnation",
        "State",
        "Vsn",
    ];

    fn encode_body(&self, out: &mut Vec<u8>) {
        msgpack::write_map_len(out, 7);
        msgpack::write_key(out, "Addr");
        msgpack::write_opt_raw(out, self.addr.as_deref());
        msgpack::write_key(out, "Incarnation");
        msgpack::write_uint(out, self.incarnation.into());
        msgpack::write_key(out, "Meta");
        msgpack::write_opt_raw(out, self.meta.as_deref());
        msgpack::write_key(out, "Name");
        msgpack::write_raw(out, self.name.as_bytes());
        msgpack::write_key(out, "Port");
        msgpack::write_uint(out, self.port.into());
        msgpack::write_key(out, "State");
        msgpack::write_int(out, self.state.into());
        msgpack::write_key(out, "Vsn");
        msgpack::write_opt_raw(out, self.vsn.as_deref());
    }

    fn decode_body(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let mut m = Self {
            name: String::new(),
            addr: None,
            port: 0,
            meta: None,
            incarnation: 0,
            state: NodeState::Alive,
            vsn: None,
        };
        r.read_struct(Self::DECLARED, |key, r| {
            match key {
                b"Name" => m.name = r.string()?,
                b"Addr" => m.addr = r.bytes()?,
                b"Port" => m.port = r.u16()?,
                b"Meta" => m.meta = r.bytes()?,
                b"Incarnation" => m.incarnation = r.u32()?,
                b"State" => m.state = r.int()?.into(),
                b"Vsn" => m.vsn = r.bytes()?,
                _ => return Ok(false),
            }
            Ok(true)
        })?;
        Ok(m)
    }
}

impl UserMsgHeader {
    /// Appends the msgpack body (no type byte).
    pub fn encode_body(&self, out: &mut Vec<u8>) {
        msgpack::write_map_len(out, 1);
        msgpack::write_key(out, "UserMsgLen");
        msgpack::write_int(out, self.user_msg_len);
    }

    fn decode_body(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let user_msg_len = r
            .read_single_field("UserMsgLen", Reader::int)?
            .unwrap_or_default();
        Ok(Self { user_msg_len })
    }
}

impl Compress {
    /// Appends `[9][msgpack compress]`.
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.push(MessageType::Compress.into());
        msgpack::write_map_len(out, 2);
        msgpack::write_key(out, "Algo");
        msgpack::write_uint(out, self.algo.into());
        msgpack::write_key(out, "Buf");
        msgpack::write_raw(out, &self.buf);
    }

    /// Decodes the body that follows a `compressMsg` type byte; returns it and the bytes used.
    pub fn decode_body(body: &[u8]) -> Result<(Self, usize), DecodeError> {
        let mut r = Reader::new(body);
        let mut m = Self::default();
        r.read_struct(&["Algo", "Buf"], |key, r| {
            match key {
                b"Algo" => m.algo = r.u8()?,
                b"Buf" => m.buf = r.bytes()?.unwrap_or_default(),
                _ => return Ok(false),
            }
            Ok(true)
        })?;
        Ok((m, r.position()))
    }
}

// ---- limits --------------------------------------------------------------------------------

/// Caps applied to what a stream's headers may declare, so that a peer cannot make us reserve
/// memory it never sends. Defaults are memberlist HEAD's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StreamLimits {
    /// Largest `Nodes` in a push/pull header (Go: 1,048,576).
    pub max_push_pull_nodes: usize,
    /// Largest user state or stream user message (Go: 20 MiB).
    pub max_user_bytes: usize,
    /// Largest encrypted stream body (Go: 20 MiB).
    pub max_encrypted_bytes: usize,
    /// Largest decompressed stream message (Go: 40 MiB).
    pub max_decompressed_bytes: usize,
}

impl Default for StreamLimits {
    fn default() -> Self {
        Self {
            max_push_pull_nodes: 1 << 20,
            max_user_bytes: 20 << 20,
            max_encrypted_bytes: 20 << 20,
            max_decompressed_bytes: 40 << 20,
        }
    }
}

fn bounded_len(field: &'static str, value: i64, max: usize) -> Result<usize, DecodeError> {
    usize::try_from(value)
        .ok()
        .filter(|&n| n <= max)
        .ok_or(DecodeError::StreamLimit { field, value })
}

// ---- whole messages ------------------------------------------------------------------------

impl Message {
    /// The type byte this message starts with.
    pub fn message_type(&self) -> MessageType {
        match self {
            Self::Ping(_) => MessageType::Ping,
            Self::IndirectPing(_) => MessageType::IndirectPing,
            Self::Ack(_) => MessageType::Ack,
            Self::Nack(_) => MessageType::Nack,
            Self::Suspect(_) => MessageType::Suspect,
            Self::Alive(_) => MessageType::Alive,
            Self::Dead(_) => MessageType::Dead,
            Self::PushPull(_) => MessageType::PushPull,
            Self::User(_) => MessageType::User,
            Self::Err(_) => MessageType::Err,
        }
    }

    /// Appends `[type][body]` in the given transport's form. Byte-identical to Go memberlist
    /// 0.2.2 (go-msgpack 0.5.x).
    pub fn encode(&self, transport: Transport, out: &mut Vec<u8>) {
        out.push(self.message_type().into());
        match self {
            Self::Ping(m) => m.encode_body(out),
            Self::IndirectPing(m) => m.encode_body(out),
            Self::Ack(m) => m.encode_body(out),
            Self::Nack(m) => m.encode_body(out),
            Self::Suspect(m) => encode_accusation(out, m.incarnation, &m.node, &m.from),
            Self::Alive(m) => m.encode_body(out),
            Self::Dead(m) => encode_accusation(out, m.incarnation, &m.node, &m.from),
            Self::PushPull(m) => {
                PushPullHeader {
                    nodes: m.states.len() as i64,
                    user_state_len: m.user_state.len() as i64,
                    join: m.join,
                }
                .encode_body(out);
                for s in &m.states {
                    s.encode_body(out);
                }
                out.extend_from_slice(&m.user_state);
            }
            Self::User(msg) => {
                if transport == Transport::Stream {
                    UserMsgHeader {
                        user_msg_len: msg.len() as i64,
                    }
                    .encode_body(out);
                }
                out.extend_from_slice(msg);
            }
            Self::Err(m) => m.encode_body(out),
        }
    }

    /// Encodes into a new buffer.
    pub fn to_vec(&self, transport: Transport) -> Vec<u8> {
        let mut out = Vec::new();
        self.encode(transport, &mut out);
        out
    }

    /// Decodes one message that fills `buf` (a UDP packet's payload or a compound part).
    /// Framing types (compound, compress, CRC, label) are not messages and are rejected here;
    /// [`packet::open`](super::packet::open) peels them. Trailing bytes after a msgpack body are
    /// ignored, as Go does.
    pub fn decode_packet(buf: &[u8]) -> Result<Self, DecodeError> {
        let (&ty, body) = buf.split_first().ok_or(DecodeError::Empty)?;
        let mut r = Reader::new(body);
        Ok(match MessageType::from(ty) {
            MessageType::Ping => Self::Ping(Ping::decode_body(&mut r)?),
            MessageType::IndirectPing => Self::IndirectPing(IndirectPing::decode_body(&mut r)?),
            MessageType::Ack => Self::Ack(Ack::decode_body(&mut r)?),
            MessageType::Nack => Self::Nack(Nack::decode_body(&mut r)?),
            MessageType::Suspect => {
                let (incarnation, node, from) = decode_accusation(&mut r)?;
                Self::Suspect(Suspect {
                    incarnation,
                    node,
                    from,
                })
            }
            MessageType::Alive => Self::Alive(Alive::decode_body(&mut r)?),
            MessageType::Dead => {
                let (incarnation, node, from) = decode_accusation(&mut r)?;
                Self::Dead(Dead {
                    incarnation,
                    node,
                    from,
                })
            }
            MessageType::User => Self::User(body.to_vec()),
            _ => return Err(DecodeError::UnknownMessageType(ty)),
        })
    }

    /// Decodes one plain (not compressed, not encrypted) stream message from the start of
    /// `buf`, returning it and the number of bytes it used. A stream carries ping, ack,
    /// push/pull, user and error messages.
    ///
    /// [`DecodeError::Truncated`] here means `buf` ends before the message does: on a live
    /// connection, read more and try again.
    pub fn decode_stream(buf: &[u8], limits: &StreamLimits) -> Result<(Self, usize), DecodeError> {
        let (&ty, body) = buf.split_first().ok_or(DecodeError::Truncated)?;
        let mut r = Reader::new(body);
        let msg = match MessageType::from(ty) {
            MessageType::Ping => Self::Ping(Ping::decode_body(&mut r)?),
            MessageType::Ack => Self::Ack(Ack::decode_body(&mut r)?),
            MessageType::Err => Self::Err(ErrResp::decode_body(&mut r)?),
            MessageType::PushPull => {
                let header = PushPullHeader::decode_body(&mut r)?;
                let nodes = bounded_len("Nodes", header.nodes, limits.max_push_pull_nodes)?;
                let user_len =
                    bounded_len("UserStateLen", header.user_state_len, limits.max_user_bytes)?;
                // Each state takes at least a byte, so the input bounds the allocation.
                let mut states = Vec::with_capacity(nodes.min(r.remaining()));
                for _ in 0..nodes {
                    states.push(PushNodeState::decode_body(&mut r)?);
                }
                let user_state = r.take(user_len)?.to_vec();
                Self::PushPull(PushPull {
                    join: header.join,
                    states,
                    user_state,
                })
            }
            MessageType::User => {
                let header = UserMsgHeader::decode_body(&mut r)?;
                let len = bounded_len("UserMsgLen", header.user_msg_len, limits.max_user_bytes)?;
                Self::User(r.take(len)?.to_vec())
            }
            _ => return Err(DecodeError::UnknownMessageType(ty)),
        };
        Ok((msg, 1 + r.position()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(s: &str) -> Vec<u8> {
        hex::decode(s.replace(' ', "")).unwrap()
    }

    fn full_ping() -> Message {
        Message::Ping(Ping {
            seq_no: 1,
            node: "node-b".into(),
            source_addr: vec![127, 0, 0, 1],
            source_port: 7946,
            source_node: "node-a".into(),
        })
    }

    // Byte vectors from the research note (memberlist-protocol.md section 9.2), produced by Go.
    #[test]
    fn encodes_like_go() {
        let cases: Vec<(Message, &str)> = vec![
            (
                Message::Ping(Ping {
                    seq_no: 100,
                    ..Ping::default()
                }),
                "00 82 a4 4e6f6465 a0 a5 5365714e6f 64",
            ),
            (
                full_ping(),
                "0085a44e6f6465a66e6f64652d62a55365714e6f01aa536f7572636541646472a47f000001\
                 aa536f757263654e6f6465a66e6f64652d61aa536f75726365506f7274cd1f0a",
            ),
            (
                Message::Ack(Ack {
                    seq_no: 1,
                    payload: None,
                }),
                "0282a75061796c6f6164c0a55365714e6f01",
            ),
            (
                Message::Nack(Nack { seq_no: 300 }),
                "0b81a55365714e6fcd012c",
            ),
            (
                Message::Alive(Alive {
                    incarnation: 1,
                    node: "node-a".into(),
                    addr: Some(vec![127, 0, 0, 1]),
                    port: 7946,
                    meta: None,
                    vsn: Some(vec![1, 5, 2, 0, 0, 0]),
                }),
                "0486a441646472a47f000001ab496e6361726e6174696f6e01a44d657461c0a44e6f6465a66e\
                 6f64652d61a4506f7274cd1f0aa356736ea6010502000000",
            ),
            (
                Message::Err(ErrResp {
                    error: "boom".into(),
                }),
                "0d81a54572726f72a4626f6f6d",
            ),
        ];
        for (msg, want) in cases {
            let want = hex(want);
            assert_eq!(msg.to_vec(Transport::Packet), want, "{msg:?}");
        }
    }

    #[test]
    fn push_pull_header_ints_are_unsigned_like_go_msgpack_0_5() {
        let mut out = Vec::new();
        PushPullHeader {
            nodes: 200,
            user_state_len: 300,
            join: false,
        }
        .encode_body(&mut out);
        assert_eq!(
            out,
            hex("83a44a6f696ec2a54e6f646573ccc8ac5573657253746174654c656ecd012c")
        );
        // go-msgpack v2 writes the same header with signed ints; we must read that too.
        let v2 = hex("0683a44a6f696ec2a54e6f646573d100c8ac5573657253746174654c656ed1012c");
        let err = Message::decode_stream(&v2, &StreamLimits::default()).unwrap_err();
        assert_eq!(
            err,
            DecodeError::Truncated,
            "header read; 200 states missing"
        );
    }

    #[test]
    fn decodes_struct_sent_as_array_in_declaration_order() {
        // ping as [SeqNo, Node]
        let bytes = [0x00, 0x92, 0x07, 0xa1, b'x'];
        assert_eq!(
            Message::decode_packet(&bytes),
            Ok(Message::Ping(Ping {
                seq_no: 7,
                node: "x".into(),
                ..Ping::default()
            }))
        );
    }

    #[test]
    fn unknown_keys_are_skipped_and_case_matters() {
        // {"node": "x", "Extra": [1, {}], "SeqNo": 5}
        let bytes = hex("00 83 a46e6f6465 a178 a54578747261 920180 a55365714e6f 05");
        assert_eq!(
            Message::decode_packet(&bytes),
            Ok(Message::Ping(Ping {
                seq_no: 5,
                ..Ping::default()
            }))
        );
    }

    #[test]
    fn framing_types_are_not_messages() {
        for t in [6u8, 7, 9, 10, 12, 13, 244, 99] {
            assert_eq!(
                Message::decode_packet(&[t, 0x80]),
                Err(DecodeError::UnknownMessageType(t))
            );
        }
        assert_eq!(Message::decode_packet(&[]), Err(DecodeError::Empty));
    }

    #[test]
    fn stream_headers_are_capped() {
        let limits = StreamLimits::default();
        let mut buf = vec![6];
        PushPullHeader {
            nodes: -1,
            user_state_len: 0,
            join: false,
        }
        .encode_body(&mut buf);
        assert_eq!(
            Message::decode_stream(&buf, &limits),
            Err(DecodeError::StreamLimit {
                field: "Nodes",
                value: -1
            })
        );
        let mut buf = vec![8];
        UserMsgHeader {
            user_msg_len: 21 << 20,
        }
        .encode_body(&mut buf);
        assert!(matches!(
            Message::decode_stream(&buf, &limits),
            Err(DecodeError::StreamLimit { .. })
        ));
    }

    #[test]
    fn stream_round_trip_reports_length() {
        let msg = Message::PushPull(PushPull {
            join: true,
            states: vec![PushNodeState {
                name: "a".into(),
                addr: Some(vec![198, 18, 0, 1]),
                port: 7946,
                meta: Some(vec![]),
                incarnation: u32::MAX,
                state: NodeState::Left,
                vsn: Some(vec![1, 5, 2, 0, 0, 0]),
            }],
            user_state: b"state".to_vec(),
        });
        let mut bytes = msg.to_vec(Transport::Stream);
        let len = bytes.len();
        bytes.extend_from_slice(b"trailing");
        assert_eq!(
            Message::decode_stream(&bytes, &StreamLimits::default()),
            Ok((msg, len))
        );
    }
}

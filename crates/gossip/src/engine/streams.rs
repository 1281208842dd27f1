//! TCP exchanges: answering accepted connections (pings, push/pulls, user messages), and
//! the connections we ask the driver to make, with what each one was for and what its
//! failure means.

use super::{
    Event, IncomingStream, Membership, StreamFailure, StreamId, StreamProgress, StreamRequest,
};
use crate::wire::{Ack, Message, stream};
use std::net::SocketAddr;
use std::time::Instant;

/// What an outgoing stream is for, so that its reply or its failure reaches the job that
/// asked for it (a one-way stream expects no reply and is not remembered).
#[derive(Debug)]
pub(super) enum StreamPurpose {
    PushPull { join: bool, addr: SocketAddr },
    TcpPing { seq: u32 },
    OneWay,
}

impl Membership {
    /// An accepted TCP connection has delivered `buf` so far (everything since it opened).
    pub fn handle_incoming_stream(&mut self, now: Instant, buf: &[u8]) -> IncomingStream {
        self.note_turn(now);
        let opened = match stream::open(&self.framing, buf, true) {
            Ok(None) => return IncomingStream::NeedMore,
            Ok(Some(o)) => o,
            Err(e) => {
                self.stats.streams_in += 1;
                self.count_rejected(e);
                return IncomingStream::Rejected(e);
            }
        };
        self.stats.streams_in += 1;
        self.heard_from_others(now, None);
        match opened.message {
            Message::Ping(ping) => {
                if !ping.node.is_empty() && ping.node != self.name() {
                    self.stats.ignored += 1;
                    return IncomingStream::Close;
                }
                let ack = Message::Ack(Ack {
                    seq_no: ping.seq_no,
                    payload: None,
                });
                IncomingStream::Reply(self.seal_stream(&ack, false))
            }
            Message::PushPull(remote) => {
                let reply = Message::PushPull(self.local_push_pull(remote.join));
                let bytes = self.seal_stream(&reply, false);
                self.merge_remote(now, remote);
                self.push_pull_ended(now, None, true);
                IncomingStream::Reply(bytes)
            }
            Message::User(msg) => {
                self.events.push_back(Event::UserMsg(msg));
                IncomingStream::Close
            }
            _ => {
                self.stats.ignored += 1;
                IncomingStream::Close
            }
        }
    }

    /// An outgoing TCP exchange delivered `buf` so far.
    pub fn handle_stream_response(
        &mut self,
        now: Instant,
        id: StreamId,
        buf: &[u8],
    ) -> StreamProgress {
        self.note_turn(now);
        let opened = match stream::open(&self.framing, buf, false) {
            Ok(None) => return StreamProgress::NeedMore,
            Ok(Some(o)) => Ok(o.message),
            Err(e) => Err(e),
        };
        let Some(purpose) = self.streams.remove(&id) else {
            return StreamProgress::Done;
        };
        match (purpose, opened) {
            (StreamPurpose::PushPull { join, addr }, Ok(Message::PushPull(remote))) => {
                self.heard_from_others(now, Some(addr));
                self.merge_remote(now, remote);
                self.push_pull_ended(now, Some(addr), true);
                self.events.push_back(Event::PushPullComplete {
                    addr,
                    join,
                    ok: true,
                });
            }
            (StreamPurpose::TcpPing { seq }, Ok(Message::Ack(ack))) => {
                if let Some(p) = &mut self.probe
                    && p.seq == seq
                    && ack.seq_no == seq
                {
                    p.tcp_ok = true;
                }
            }
            (purpose, result) => {
                if let Err(e) = result {
                    self.count_rejected(e);
                } else {
                    self.stats.ignored += 1;
                }
                self.fail_stream(now, purpose, StreamFailure::Io);
            }
        }
        StreamProgress::Done
    }

    /// An outgoing TCP exchange failed.
    pub fn handle_stream_failed(&mut self, now: Instant, id: StreamId, why: StreamFailure) {
        if let Some(purpose) = self.streams.remove(&id) {
            self.fail_stream(now, purpose, why);
        }
    }

    fn fail_stream(&mut self, now: Instant, purpose: StreamPurpose, why: StreamFailure) {
        match purpose {
            StreamPurpose::PushPull { join, addr } => {
                if why == StreamFailure::Refused {
                    self.handle_unreachable(now, addr);
                }
                self.push_pull_ended(now, Some(addr), false);
                self.events.push_back(Event::PushPullComplete {
                    addr,
                    join,
                    ok: false,
                });
            }
            StreamPurpose::TcpPing { seq } => {
                if why == StreamFailure::Refused
                    && self.config.use_strong_evidence
                    && self.probe.as_ref().is_some_and(|p| p.seq == seq)
                {
                    self.probe_absent(now);
                }
            }
            StreamPurpose::OneWay => {}
        }
    }

    fn seal_stream(&mut self, msg: &Message, dialer: bool) -> Vec<u8> {
        let mut out = Vec::new();
        stream::seal(&self.framing, msg, dialer, &mut self.rng, &mut out);
        out
    }

    pub(super) fn request_stream(
        &mut self,
        now: Instant,
        to: SocketAddr,
        msg: &Message,
        expects_reply: bool,
        purpose: StreamPurpose,
    ) -> StreamId {
        let deadline = now + self.config.tcp_timeout;
        self.request_stream_until(to, msg, expects_reply, purpose, deadline)
    }

    pub(super) fn request_stream_until(
        &mut self,
        to: SocketAddr,
        msg: &Message,
        expects_reply: bool,
        purpose: StreamPurpose,
        deadline: Instant,
    ) -> StreamId {
        self.next_stream += 1;
        let id = StreamId(self.next_stream);
        let bytes = self.seal_stream(msg, true);
        if expects_reply {
            self.streams.insert(id, purpose);
        }
        self.stats.streams_out += 1;
        self.stream_requests.push_back(StreamRequest {
            id,
            to,
            bytes,
            expects_reply,
            deadline,
        });
        id
    }
}

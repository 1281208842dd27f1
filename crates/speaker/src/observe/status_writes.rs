//! The Kubernetes status writer's live counters, read by `/metrics`
//! ([`vigil_observe::metrics::StatusWriterMetrics`]). Cheap to clone; every clone counts into
//! the same values.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use vigil_observe::metrics::{StatusWriterMetrics, WriteCounts};

/// A kind of ServiceL2Status write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteKind {
    /// The object created (its status written next, as a patch).
    Create,
    /// The status subresource patched.
    PatchStatus,
    /// The object deleted.
    Delete,
}

/// What became of one `nodeAssigned` Event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventOutcome {
    /// Written.
    Sent,
    /// Refused, timed out, or its Service was gone.
    Failed,
    /// The queue was full.
    Dropped,
}

/// The status writer's counters and gauges.
#[derive(Debug, Clone, Default)]
pub struct StatusWriteCounters {
    inner: Arc<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    /// Set when a writer runs: the series are exported.
    running: AtomicBool,
    queue_depth: AtomicU64,
    backing_off: AtomicU64,
    in_flight: AtomicU64,
    observed: AtomicU64,
    /// Per [`WriteKind`] (index), ok then failed.
    writes: [[AtomicU64; 2]; 3],
    /// Per [`EventOutcome`] (index).
    events: [AtomicU64; 3],
}

impl StatusWriteCounters {
    /// A writer runs: `/metrics` shows its series.
    pub fn set_running(&self) {
        self.inner.running.store(true, Ordering::Relaxed);
    }

    /// The gauges, as the writer sees them now.
    pub fn set_gauges(
        &self,
        queue_depth: usize,
        backing_off: usize,
        in_flight: usize,
        observed: usize,
    ) {
        let i = &self.inner;
        i.queue_depth.store(queue_depth as u64, Ordering::Relaxed);
        i.backing_off.store(backing_off as u64, Ordering::Relaxed);
        i.in_flight.store(in_flight as u64, Ordering::Relaxed);
        i.observed.store(observed as u64, Ordering::Relaxed);
    }

    /// One write done (`ok`) or failed.
    pub fn count_write(&self, kind: WriteKind, ok: bool) {
        self.inner.writes[kind as usize][usize::from(!ok)].fetch_add(1, Ordering::Relaxed);
    }

    /// One Event's fate.
    pub fn count_event(&self, outcome: EventOutcome) {
        self.inner.events[outcome as usize].fetch_add(1, Ordering::Relaxed);
    }

    /// The values for one scrape, when a writer runs.
    pub fn metrics(&self) -> Option<StatusWriterMetrics> {
        let i = &self.inner;
        let load = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let writes = |kind: WriteKind| WriteCounts {
            ok: load(&i.writes[kind as usize][0]),
            failed: load(&i.writes[kind as usize][1]),
        };
        i.running
            .load(Ordering::Relaxed)
            .then(|| StatusWriterMetrics {
                queue_depth: load(&i.queue_depth),
                backing_off: load(&i.backing_off),
                in_flight: load(&i.in_flight),
                observed: load(&i.observed),
                create: writes(WriteKind::Create),
                patch_status: writes(WriteKind::PatchStatus),
                delete: writes(WriteKind::Delete),
                events_sent: load(&i.events[EventOutcome::Sent as usize]),
                events_failed: load(&i.events[EventOutcome::Failed as usize]),
                events_dropped: load(&i.events[EventOutcome::Dropped as usize]),
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_land_in_their_series_and_nothing_shows_before_a_writer_runs() {
        let c = StatusWriteCounters::default();
        assert_eq!(c.metrics(), None);
        c.set_running();
        c.count_write(WriteKind::Create, true);
        c.count_write(WriteKind::Delete, false);
        c.count_event(EventOutcome::Dropped);
        c.set_gauges(4, 1, 2, 7);
        let m = c.clone().metrics().unwrap();
        assert_eq!(m.create, WriteCounts { ok: 1, failed: 0 });
        assert_eq!(m.delete, WriteCounts { ok: 0, failed: 1 });
        assert_eq!(m.patch_status, WriteCounts::default());
        assert_eq!((m.events_dropped, m.events_sent), (1, 0));
        assert_eq!(
            (m.queue_depth, m.backing_off, m.in_flight, m.observed),
            (4, 1, 2, 7)
        );
    }
}

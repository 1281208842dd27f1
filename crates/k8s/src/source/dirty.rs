//! What changed since the builder last looked, keyed by what it touches, and the bell that
//! wakes the builder. Marks made while the builder works form its next batch: that is the
//! coalescing, with no fixed delay.

use std::collections::BTreeSet;
use std::sync::{Mutex, PoisonError};
use tokio::sync::Notify;

/// An EndpointSlice changed: it now belongs to `owner` (`namespace/service`; `None`:
/// deleted, or no service-name label).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SliceMove {
    /// The slice's `namespace/name`.
    pub(crate) slice: String,
    /// The Service it names now.
    pub(crate) owner: Option<String>,
}

/// The keys to translate again.
#[derive(Debug, Default)]
pub(crate) struct Dirty {
    /// Services (`namespace/name`) created, changed or deleted.
    pub(crate) services: BTreeSet<String>,
    /// EndpointSlices changed, in order.
    pub(crate) slices: Vec<SliceMove>,
    /// Some Node changed in a way the translation reads.
    pub(crate) nodes: bool,
    /// An IPAddressPool or L2Advertisement changed.
    pub(crate) config: bool,
    /// The speaker Pods changed.
    pub(crate) peers: bool,
    /// A store was listed again: translate everything and check.
    pub(crate) relisted: bool,
}

impl Dirty {
    /// Nothing is marked.
    pub(crate) fn is_empty(&self) -> bool {
        self.services.is_empty()
            && self.slices.is_empty()
            && !self.nodes
            && !self.config
            && !self.peers
            && !self.relisted
    }
}

/// The dirty set and its bell.
#[derive(Debug, Default)]
pub(crate) struct Bell {
    dirty: Mutex<Dirty>,
    notify: Notify,
}

impl Bell {
    /// Marks something dirty and wakes the builder.
    pub(crate) fn mark(&self, f: impl FnOnce(&mut Dirty)) {
        f(&mut self.dirty.lock().unwrap_or_else(PoisonError::into_inner));
        self.notify.notify_one();
    }

    /// Everything marked so far, leaving the set empty.
    pub(crate) fn take(&self) -> Dirty {
        std::mem::take(&mut *self.dirty.lock().unwrap_or_else(PoisonError::into_inner))
    }

    /// Reads the set without taking it.
    pub(crate) fn peek<T>(&self, f: impl FnOnce(&Dirty) -> T) -> T {
        f(&self.dirty.lock().unwrap_or_else(PoisonError::into_inner))
    }

    /// Waits for the next mark (returns at once if one came since the last wait).
    pub(crate) async fn rung(&self) {
        self.notify.notified().await;
    }
}

//! Every vigil metric, defined once, rendered as Prometheus text by `prometheus-client`.
//!
//! Each collector is a plain struct of the values read for one scrape; [`Scrape`] renders the
//! ones a process has:
//!
//! ```
//! use vigil_observe::metrics::{GossipMetrics, Scrape};
//! let gossip = GossipMetrics { stats: Some(Default::default()), ..Default::default() };
//! let text = Scrape::new().with(gossip).render();
//! assert!(text.contains("# TYPE vigil_gossip_probes_total counter"));
//! ```
//!
//! Names: MetalLB's where MetalLB has the metric (`metallb_speaker_announced`,
//! `metallb_layer2_*`, `metallb_k8s_client_*`, `metallb_allocator_*`, `process_*`, so its
//! dashboards and alerts work unchanged), `vigil_<part>_*` otherwise. Counters end in `_total`
//! (added by the encoder), except MetalLB's three `metallb_layer2_*` counters, which MetalLB
//! exports as counters without the suffix: `prometheus-client` cannot name a counter so, so
//! they are encoded untyped and [`Scrape::render`] writes their `# TYPE` line as `counter`
//! ([`COUNTERS_WITHOUT_TOTAL`]).
// Without the speaker's collectors (the controller's build) some shared encoders go unused.
#![cfg_attr(
    not(feature = "speaker"),
    allow(dead_code, unused_imports, unused_macros)
)]

// The speaker's collectors read the gossip driver, the announcer and the speaker core; the
// controller builds this crate without them (feature `speaker`, on by default) so that it
// links none of the speaker's I/O.
mod allocator;
#[cfg(feature = "speaker")]
mod election;
#[cfg(feature = "speaker")]
mod failover;
#[cfg(feature = "speaker")]
mod gossip;
mod k8s;
#[cfg(feature = "speaker")]
mod l2;
mod process;
#[cfg(feature = "speaker")]
mod speaker;

pub use allocator::{AllocatorMetrics, PoolFigures};
#[cfg(feature = "speaker")]
pub use election::ElectionMetrics;
#[cfg(feature = "speaker")]
pub use failover::{FailoverMetrics, STAGE_BUCKETS};
#[cfg(feature = "speaker")]
pub use gossip::{GossipMetrics, MemberCounts, MemberEventCounts};
pub use k8s::{K8sClientMetrics, MetalLbClientMetrics, StatusWriterMetrics, WriteCounts};
#[cfg(feature = "speaker")]
pub use l2::L2Metrics;
pub use process::{ProcessMetrics, Stat as ProcessStat};
#[cfg(feature = "speaker")]
pub use speaker::{LocalAddressMetrics, SpeakerMetrics};
#[cfg(feature = "speaker")]
pub use vigil_speaker_core::core::MemberEventKind;

use axum::http::header;
use axum::response::{IntoResponse, Response};
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{
    DescriptorEncoder, EncodeLabelSet, EncodeMetric, MetricEncoder, NoLabelSet,
};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::registry::Registry;

/// The `Content-Type` of [`Scrape::render`]'s text (Prometheus text format 0.0.4).
pub const CONTENT_TYPE: &str = prometheus_client::encoding::prometheus_text::CONTENT_TYPE;

/// The metrics of one scrape: the collectors filled for it, rendered together.
#[derive(Debug, Default)]
pub struct Scrape {
    registry: Registry,
}

impl Scrape {
    /// An empty scrape.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a collector.
    #[must_use]
    pub fn with(mut self, collector: impl Collector) -> Self {
        self.registry.register_collector(Box::new(collector));
        self
    }

    /// The Prometheus text of every collector added, in the order added.
    pub fn render(&self) -> String {
        let mut out = String::new();
        // Writing to a String cannot fail, and the collectors only write.
        prometheus_client::encoding::prometheus_text::encode(&mut out, &self.registry)
            .expect("encoding into a String");
        for name in COUNTERS_WITHOUT_TOTAL {
            let untyped = format!("# TYPE {name} untyped\n");
            if out.contains(&untyped) {
                out = out.replace(&untyped, &format!("# TYPE {name} counter\n"));
            }
        }
        out
    }

    /// The `/metrics` answer: the text with its content type.
    pub fn response(&self) -> Response {
        ([(header::CONTENT_TYPE, CONTENT_TYPE)], self.render()).into_response()
    }
}

/// MetalLB's counters whose names do not end in `_total`: encoded untyped (so the encoder
/// adds no suffix), typed `counter` by [`Scrape::render`].
pub const COUNTERS_WITHOUT_TOTAL: &[&str] = &[
    "metallb_layer2_requests_received",
    "metallb_layer2_responses_sent",
    "metallb_layer2_gratuitous_sent",
];

/// A counter value written without a type, so its name gets no `_total` (MetalLB's names).
#[derive(Debug)]
struct Untyped(u64);

impl EncodeMetric for Untyped {
    fn encode(&self, mut encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
        encoder.encode_counter::<NoLabelSet, _, u64>(&self.0, None)
    }

    fn metric_type(&self) -> MetricType {
        MetricType::Unknown
    }
}

/// A counter with no labels; `name` without `_total`.
fn counter(enc: &mut DescriptorEncoder, name: &str, help: &str, value: u64) -> std::fmt::Result {
    let metric = ConstCounter::new(value);
    metric.encode(enc.encode_descriptor(name, help, None, metric.metric_type())?)
}

/// A gauge with no labels.
fn gauge(enc: &mut DescriptorEncoder, name: &str, help: &str, value: u64) -> std::fmt::Result {
    let metric = ConstGauge::new(value);
    metric.encode(enc.encode_descriptor(name, help, None, metric.metric_type())?)
}

/// A counter family: one series per label set; `name` without `_total`.
fn counters<L: EncodeLabelSet>(
    enc: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    series: impl IntoIterator<Item = (L, u64)>,
) -> std::fmt::Result {
    let mut family = enc.encode_descriptor(name, help, None, MetricType::Counter)?;
    for (labels, value) in series {
        ConstCounter::new(value).encode(family.encode_family(&labels)?)?;
    }
    Ok(())
}

/// A gauge family: one series per label set.
fn gauges<L: EncodeLabelSet>(
    enc: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    series: impl IntoIterator<Item = (L, u64)>,
) -> std::fmt::Result {
    let mut family = enc.encode_descriptor(name, help, None, MetricType::Gauge)?;
    for (labels, value) in series {
        ConstGauge::new(value).encode(family.encode_family(&labels)?)?;
    }
    Ok(())
}

/// An untyped family (MetalLB's counters without `_total`).
fn untyped<L: EncodeLabelSet>(
    enc: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    series: impl IntoIterator<Item = (L, u64)>,
) -> std::fmt::Result {
    let mut family = enc.encode_descriptor(name, help, None, MetricType::Unknown)?;
    for (labels, value) in series {
        Untyped(value).encode(family.encode_family(&labels)?)?;
    }
    Ok(())
}

/// Implements `EncodeLabelValue` for an enum with `fn as_str(self) -> &'static str`.
macro_rules! label_value {
    ($t:ty) => {
        impl prometheus_client::encoding::EncodeLabelValue for $t {
            fn encode(
                &self,
                encoder: &mut prometheus_client::encoding::LabelValueEncoder,
            ) -> Result<(), std::fmt::Error> {
                prometheus_client::encoding::EncodeLabelValue::encode(&self.as_str(), encoder)
            }
        }
    };
}
use label_value;

#[cfg(test)]
#[cfg(feature = "speaker")]
mod tests;

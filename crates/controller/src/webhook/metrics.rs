//! The webhook's counters, `vigil_controller_webhook_*`: what it answered, what it refused to
//! read, and its certificate's changes. Bad input is counted here, never a panic.

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::ConstCounter;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// Why a request was not read (the `reason` label of `..._bad_requests_total`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BadRequest {
    /// The body is not a review this server reads (bad JSON, no request, wrong kind).
    Malformed,
    /// The body is over the size limit.
    TooLarge,
    /// No webhook at that path, or not a POST.
    UnknownPath,
    /// The TLS handshake failed, or the request head was too slow.
    Connection,
}

impl BadRequest {
    const ALL: [Self; 4] = [
        Self::Malformed,
        Self::TooLarge,
        Self::UnknownPath,
        Self::Connection,
    ];

    fn label(self) -> &'static str {
        match self {
            Self::Malformed => "malformed",
            Self::TooLarge => "too_large",
            Self::UnknownPath => "unknown_path",
            Self::Connection => "connection",
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// The counters (shared by the server and the rotator).
#[derive(Debug, Default)]
pub struct WebhookMetrics {
    /// Admission requests allowed.
    pub allowed: AtomicU64,
    /// Admission requests denied (with MetalLB's message).
    pub denied: AtomicU64,
    /// Conversion requests answered successfully.
    pub converted: AtomicU64,
    /// Conversion requests answered with a failure.
    pub conversion_failed: AtomicU64,
    /// Requests not read, by [`BadRequest`].
    bad: [AtomicU64; 4],
    /// Certificates made (new serving certificate or new CA).
    pub cert_rotations: AtomicU64,
    /// Certificate checks that failed (retried).
    pub cert_errors: AtomicU64,
}

impl WebhookMetrics {
    /// Counts a request not read.
    pub fn bad(&self, why: BadRequest) {
        self.bad[why.index()].fetch_add(1, Ordering::Relaxed);
    }

    /// Requests not read for `why` so far.
    pub fn bad_count(&self, why: BadRequest) -> u64 {
        self.bad[why.index()].load(Ordering::Relaxed)
    }
}

/// The shared counters as a collector for a scrape (`crate::metrics`).
#[derive(Debug, Clone, Default)]
pub struct WebhookCollector(pub Arc<WebhookMetrics>);

impl Collector for WebhookCollector {
    fn encode(&self, enc: DescriptorEncoder) -> std::fmt::Result {
        self.0.encode(enc)
    }
}

impl Collector for WebhookMetrics {
    fn encode(&self, mut enc: DescriptorEncoder) -> std::fmt::Result {
        let load = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let mut counter = |name: &str, help: &str, series: Vec<(Vec<(&str, &str)>, u64)>| {
            let mut family = enc.encode_descriptor(name, help, None, MetricType::Counter)?;
            for (labels, value) in series {
                let labels: Vec<(String, String)> = labels
                    .into_iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect();
                ConstCounter::new(value).encode(family.encode_family(&labels)?)?;
            }
            Ok::<(), std::fmt::Error>(())
        };
        counter(
            "vigil_controller_webhook_admissions",
            "Admission reviews answered, by verdict.",
            vec![
                (vec![("verdict", "allowed")], load(&self.allowed)),
                (vec![("verdict", "denied")], load(&self.denied)),
            ],
        )?;
        counter(
            "vigil_controller_webhook_conversions",
            "BGPPeer conversion reviews answered, by result.",
            vec![
                (vec![("result", "success")], load(&self.converted)),
                (vec![("result", "failure")], load(&self.conversion_failed)),
            ],
        )?;
        counter(
            "vigil_controller_webhook_bad_requests",
            "Webhook requests not read, by reason.",
            BadRequest::ALL
                .iter()
                .map(|r| (vec![("reason", r.label())], self.bad_count(*r)))
                .collect(),
        )?;
        counter(
            "vigil_controller_webhook_certificates_made",
            "Webhook certificates made (a new serving certificate, or a new CA and one).",
            vec![(vec![], load(&self.cert_rotations))],
        )?;
        counter(
            "vigil_controller_webhook_certificate_errors",
            "Webhook certificate checks that failed (retried).",
            vec![(vec![], load(&self.cert_errors))],
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_render_as_prometheus_families() {
        let m = Arc::new(WebhookMetrics::default());
        m.bad(BadRequest::Malformed);
        m.denied.fetch_add(2, Ordering::Relaxed);
        let text = vigil_observe::metrics::Scrape::new()
            .with(WebhookCollector(m))
            .render();
        for line in [
            "vigil_controller_webhook_bad_requests_total{reason=\"malformed\"} 1",
            "vigil_controller_webhook_bad_requests_total{reason=\"too_large\"} 0",
            "vigil_controller_webhook_admissions_total{verdict=\"denied\"} 2",
            "vigil_controller_webhook_certificates_made_total 0",
        ] {
            assert!(text.contains(line), "{line} not in\n{text}");
        }
    }
}

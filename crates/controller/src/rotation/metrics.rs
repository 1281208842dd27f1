//! The rotation's metrics, `vigil_controller_key_rotation_*`, and the controller's
//! `/metrics` route (on `vigil-observe`'s one HTTP server).

use super::plan::{PauseReason, Step};
use axum::Router;
use axum::extract::State;
use axum::response::Response;
use axum::routing::get;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use std::sync::{Arc, Mutex, PoisonError};
use vigil_observe::metrics::Scrape;

/// What the rotation exports, updated by the driver.
#[derive(Debug, Clone, Default)]
pub struct RotationMetrics {
    /// The step the Secret is at (`None`: not read yet, or rotation off).
    pub step: Option<Step>,
    /// Why the rotation is paused, if it is (only the leader judges).
    pub paused: Option<&'static str>,
    /// Rotations this process completed (steady again with a new key).
    pub completed: u64,
    /// Keyring writes this process made.
    pub writes: u64,
    /// Live speakers at the last look.
    pub live_speakers: u64,
}

/// The metrics shared between the driver and the HTTP route.
pub type SharedMetrics = Arc<Mutex<RotationMetrics>>;

impl RotationMetrics {
    /// Sets the pause reason.
    pub fn set_paused(&mut self, reason: Option<&PauseReason>) {
        self.paused = reason.map(PauseReason::label);
    }
}

fn family<'a>(
    enc: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    kind: MetricType,
    series: impl IntoIterator<Item = (Vec<(&'static str, &'a str)>, u64)>,
) -> std::fmt::Result {
    let mut family = enc.encode_descriptor(name, help, None, kind)?;
    for (labels, value) in series {
        let labels: Vec<(String, String)> = labels
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let metric = family.encode_family(&labels)?;
        if kind == MetricType::Counter {
            ConstCounter::new(value).encode(metric)?;
        } else {
            ConstGauge::new(value).encode(metric)?;
        }
    }
    Ok(())
}

impl Collector for RotationMetrics {
    fn encode(&self, mut enc: DescriptorEncoder) -> std::fmt::Result {
        family(
            &mut enc,
            "vigil_controller_key_rotation_step",
            "1 for the step the memberlist keyring is at (steady, adding, switching).",
            MetricType::Gauge,
            Step::ALL
                .iter()
                .map(|s| (vec![("step", s.as_str())], u64::from(self.step == Some(*s)))),
        )?;
        family(
            &mut enc,
            "vigil_controller_key_rotation_paused",
            "1 for the reason the key rotation waits, if it does.",
            MetricType::Gauge,
            PauseReason::LABELS
                .iter()
                .map(|r| (vec![("reason", *r)], u64::from(self.paused == Some(*r)))),
        )?;
        family(
            &mut enc,
            "vigil_controller_key_rotations",
            "Key rotations this controller completed.",
            MetricType::Counter,
            [(Vec::new(), self.completed)],
        )?;
        family(
            &mut enc,
            "vigil_controller_key_rotation_writes",
            "Memberlist keyring updates this controller wrote.",
            MetricType::Counter,
            [(Vec::new(), self.writes)],
        )?;
        family(
            &mut enc,
            "vigil_controller_key_rotation_live_speakers",
            "Speakers whose key acknowledgement is fresh.",
            MetricType::Gauge,
            [(Vec::new(), self.live_speakers)],
        )
    }
}

/// `/metrics` with the rotation's metrics.
pub fn router(metrics: SharedMetrics) -> Router {
    Router::new()
        .route("/metrics", get(scrape))
        .with_state(metrics)
}

async fn scrape(State(metrics): State<SharedMetrics>) -> Response {
    let now = metrics
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clone();
    Scrape::new().with(now).response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_step_reason_and_counts() {
        let m = RotationMetrics {
            step: Some(Step::Adding),
            paused: Some("metallb_speaker"),
            completed: 2,
            writes: 7,
            live_speakers: 5,
        };
        let text = Scrape::new().with(m).render();
        for line in [
            "vigil_controller_key_rotation_step{step=\"adding\"} 1",
            "vigil_controller_key_rotation_step{step=\"steady\"} 0",
            "vigil_controller_key_rotation_paused{reason=\"metallb_speaker\"} 1",
            "vigil_controller_key_rotation_paused{reason=\"no_live_speakers\"} 0",
            "vigil_controller_key_rotations_total 2",
            "vigil_controller_key_rotation_writes_total 7",
            "vigil_controller_key_rotation_live_speakers 5",
        ] {
            assert!(text.contains(line), "{line} not in\n{text}");
        }
    }
}

//! What MetalLB's speaker does with each new configuration, as a pure state machine
//! (`internal/k8s/controllers/config_controller.go:requestHandler`, `speaker/main.go:SetConfig`,
//! `configuration_state_controller.go`):
//!
//! - a configuration that does not parse is reported Invalid with the reason; the last good
//!   one stays in force and `config_stale` is set (no retry until something changes);
//! - one equal to the last parsed one changes nothing (and is reported valid);
//! - one under which a Service *this node announces* would have its IPs in no pool is refused
//!   ("general handler sync state error"), stays stale and is retried; the last good one stays
//!   in force (so the owner keeps announcing while nodes that do not announce the Service
//!   take the new configuration);
//! - otherwise it is applied: `config_loaded` 1, `config_stale` 0.

use crate::config::{Config, ConfigError};
use crate::crd::ConfigurationStateStatus;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use std::collections::BTreeMap;
use std::net::IpAddr;

/// The condition type MetalLB's config reconciler writes.
pub const CONDITION_TYPE: &str = "configReconcilerValid";
/// Reason of a failing condition caused by the configuration.
pub const REASON_CONFIGURATION_ERROR: &str = "ConfigurationError";
/// Reason of a passing condition.
pub const REASON_RECONCILED: &str = "Reconciled";
/// MetalLB's message when the speaker refuses a configuration that orphans an announced IP.
pub const REFUSED_MESSAGE: &str = "configuration error: general handler sync state error";

/// The result of one reconcile.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reload {
    /// The new configuration is in force.
    Applied,
    /// Equal to the last one parsed: nothing to do.
    Unchanged,
    /// Does not parse; the last good configuration stays.
    Invalid(ConfigError),
    /// Refused: these Services this node announces would have their IPs in no pool. Retry
    /// later; the last good configuration stays.
    Refused(Vec<String>),
}

/// The config reconciler's condition, as MetalLB reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReconcilerCondition {
    /// Whether the last reconcile succeeded.
    pub valid: bool,
    /// `Reconciled` or `ConfigurationError`.
    pub reason: &'static str,
    /// Empty, or `configuration error: ...`.
    pub message: String,
}

/// One speaker's configuration state.
#[derive(Debug, Clone, Default)]
pub struct ConfigTracker {
    in_force: Option<Config>,
    last_parsed: Option<Config>,
    loaded: bool,
    stale: bool,
    condition: Option<ReconcilerCondition>,
}

impl ConfigTracker {
    /// No configuration yet: MetalLB's speaker announces nothing until one is applied.
    pub fn new() -> Self {
        Self::default()
    }

    /// Takes a freshly parsed configuration. `announced` maps the Services this node
    /// announces to their IPs.
    pub fn reconcile(
        &mut self,
        parsed: Result<Config, ConfigError>,
        announced: &BTreeMap<String, Vec<IpAddr>>,
    ) -> Reload {
        let cfg = match parsed {
            Err(e) => {
                self.stale = true;
                self.condition = Some(failing(format!(
                    "configuration error: {}",
                    e.metallb_message()
                )));
                return Reload::Invalid(e);
            }
            Ok(cfg) => cfg,
        };
        self.condition = Some(ReconcilerCondition {
            valid: true,
            reason: REASON_RECONCILED,
            message: String::new(),
        });
        if self.last_parsed.as_ref() == Some(&cfg) {
            return Reload::Unchanged;
        }
        let orphaned: Vec<String> = announced
            .iter()
            .filter(|(_, ips)| cfg.pool_for(ips).is_none())
            .map(|(svc, _)| svc.clone())
            .collect();
        if !orphaned.is_empty() {
            self.stale = true;
            self.last_parsed = None;
            self.condition = Some(failing(REFUSED_MESSAGE.to_string()));
            return Reload::Refused(orphaned);
        }
        self.last_parsed = Some(cfg.clone());
        self.in_force = Some(cfg);
        self.loaded = true;
        self.stale = false;
        Reload::Applied
    }

    /// The configuration in force, if one was ever applied.
    pub fn config(&self) -> Option<&Config> {
        self.in_force.as_ref()
    }

    /// `metallb_k8s_client_config_loaded_bool`.
    pub fn loaded(&self) -> bool {
        self.loaded
    }

    /// `metallb_k8s_client_config_stale_bool`.
    pub fn stale(&self) -> bool {
        self.stale
    }

    /// The reconciler's condition after the last reconcile.
    pub fn condition(&self) -> Option<&ReconcilerCondition> {
        self.condition.as_ref()
    }

    /// The ConfigurationState status MetalLB would show for this speaker (`now` stamps the
    /// condition: MetalLB sets it on every reconcile).
    pub fn status(&self, now: Time) -> ConfigurationStateStatus {
        let conditions: Vec<Condition> = self
            .condition
            .iter()
            .map(|c| Condition {
                type_: CONDITION_TYPE.to_string(),
                status: if c.valid { "True" } else { "False" }.to_string(),
                reason: c.reason.to_string(),
                message: c.message.clone(),
                last_transition_time: now.clone(),
                observed_generation: None,
            })
            .collect();
        let errors: Vec<&str> = conditions
            .iter()
            .filter(|c| c.status == "False" && c.reason == REASON_CONFIGURATION_ERROR)
            .map(|c| c.message.as_str())
            .collect();
        let result = if conditions.is_empty() {
            "Unknown"
        } else if errors.is_empty() {
            "Valid"
        } else {
            "Invalid"
        };
        ConfigurationStateStatus {
            result: Some(result.to_string()),
            error_summary: (!errors.is_empty()).then(|| errors.join("\n")),
            conditions: (!conditions.is_empty()).then_some(conditions),
        }
    }
}

fn failing(message: String) -> ReconcilerCondition {
    ReconcilerCondition {
        valid: false,
        reason: REASON_CONFIGURATION_ERROR,
        message,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crd::IPAddressPool;

    fn pool(name: &str, cidr: &str) -> IPAddressPool {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": name}, "spec": {"addresses": [cidr]}
        }))
        .unwrap()
    }

    fn parse(pools: &[IPAddressPool]) -> Result<Config, ConfigError> {
        Config::parse(pools, &[], &[])
    }

    fn now() -> Time {
        Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH)
    }

    #[test]
    fn unknown_until_first_reconcile_then_valid() {
        let mut t = ConfigTracker::new();
        assert_eq!(t.status(now()).result.as_deref(), Some("Unknown"));
        assert!(t.config().is_none() && !t.loaded());
        let good = [pool("lan", "198.18.0.0/24")];
        assert_eq!(t.reconcile(parse(&good), &BTreeMap::new()), Reload::Applied);
        let st = t.status(now());
        assert_eq!(st.result.as_deref(), Some("Valid"));
        assert_eq!(st.error_summary, None);
        let c = &st.conditions.unwrap()[0];
        assert_eq!(
            (c.type_.as_str(), c.status.as_str(), c.reason.as_str()),
            (CONDITION_TYPE, "True", REASON_RECONCILED)
        );
        assert!(t.loaded() && !t.stale());
        assert_eq!(
            t.reconcile(parse(&good), &BTreeMap::new()),
            Reload::Unchanged
        );
    }

    #[test]
    fn invalid_keeps_the_last_good_config_and_reverting_leaves_stale_set() {
        let mut t = ConfigTracker::new();
        let good = [pool("lan", "198.18.0.0/24")];
        t.reconcile(parse(&good), &BTreeMap::new());
        let bad = [pool("lan", "198.18.0.0/24"), pool("x", "nonsense")];
        assert!(matches!(
            t.reconcile(parse(&bad), &BTreeMap::new()),
            Reload::Invalid(_)
        ));
        assert!(t.stale());
        assert_eq!(t.config(), parse(&good).ok().as_ref());
        let st = t.status(now());
        assert_eq!(st.result.as_deref(), Some("Invalid"));
        assert_eq!(
            st.error_summary.as_deref(),
            Some(
                r#"configuration error: parsing address pool x: invalid CIDR "nonsense" in pool "x": invalid CIDR "nonsense""#
            )
        );
        // MetalLB quirk: going back to the configuration in force is "unchanged": reported
        // valid, but config_stale stays set until a configuration is applied.
        assert_eq!(
            t.reconcile(parse(&good), &BTreeMap::new()),
            Reload::Unchanged
        );
        assert_eq!(t.status(now()).result.as_deref(), Some("Valid"));
        assert!(t.stale());
    }

    #[test]
    fn refusal_is_retried_and_clears_once_the_ip_is_gone() {
        let mut t = ConfigTracker::new();
        let both = [pool("lan", "198.18.0.0/24"), pool("dmz", "198.18.1.0/24")];
        t.reconcile(parse(&both), &BTreeMap::new());
        let announced: BTreeMap<String, Vec<IpAddr>> = [(
            "default/api".to_string(),
            vec!["198.18.1.10".parse().unwrap()],
        )]
        .into();
        let lan_only = [pool("lan", "198.18.0.0/24")];
        assert_eq!(
            t.reconcile(parse(&lan_only), &announced),
            Reload::Refused(vec!["default/api".into()])
        );
        assert_eq!(
            t.status(now()).error_summary.as_deref(),
            Some(REFUSED_MESSAGE)
        );
        assert!(t.stale());
        // The same configuration is tried again (not "unchanged") and refused again...
        assert!(matches!(
            t.reconcile(parse(&lan_only), &announced),
            Reload::Refused(_)
        ));
        // ...until the service no longer holds the IP.
        assert_eq!(
            t.reconcile(parse(&lan_only), &BTreeMap::new()),
            Reload::Applied
        );
        assert!(!t.stale());
        assert_eq!(t.config().unwrap().pools.len(), 1);
    }
}

//! MetalLB's `metallb_allocator_*` (`internal/allocator/stats.go`): each pool's usable
//! addresses and addresses in use, by family, with MetalLB's names, types (gauges) and help
//! texts, from the controller's allocator.
//!
//! The figures are MetalLB's (`Allocator::status_counters` in `vigil_lb`): an `avoidBuggyIPs`
//! pool counts its addresses as MetalLB's `poolCount` does, and an IPv6 range of 2^62 or more
//! addresses counts as the largest 64-bit integer. `services_allocated_total` is registered by
//! MetalLB but never set, so MetalLB exports no series of it; vigil exports the Services
//! holding addresses of each pool.

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::gauge::ConstGauge;

/// What the controller's allocator exports: one entry per pool.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AllocatorMetrics {
    /// Every pool of the configuration in force, by name.
    pub pools: Vec<PoolFigures>,
}

/// One pool's figures.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PoolFigures {
    /// The pool's name (the `pool` label).
    pub pool: String,
    /// Usable IPv4 addresses (MetalLB's count).
    pub ipv4_total: i64,
    /// Usable IPv6 addresses.
    pub ipv6_total: i64,
    /// IPv4 addresses in use (an address shared by Services counts once).
    pub ipv4_in_use: i64,
    /// IPv6 addresses in use.
    pub ipv6_in_use: i64,
    /// Services holding addresses of the pool.
    pub services: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct ByPool {
    pool: String,
}

fn family(
    enc: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    pools: &[PoolFigures],
    value: fn(&PoolFigures) -> i64,
) -> std::fmt::Result {
    let mut family = enc.encode_descriptor(name, help, None, MetricType::Gauge)?;
    for p in pools {
        let labels = ByPool {
            pool: p.pool.clone(),
        };
        // MetalLB's gauges are floats: a count past 2^53 loses precision there as here.
        ConstGauge::new(value(p) as f64).encode(family.encode_family(&labels)?)?;
    }
    Ok(())
}

impl Collector for AllocatorMetrics {
    fn encode(&self, mut enc: DescriptorEncoder) -> std::fmt::Result {
        let pools = &self.pools;
        for (name, help, value) in [
            (
                "metallb_allocator_addresses_total",
                "Number of usable IP addresses, per pool",
                (|p: &PoolFigures| p.ipv4_total.saturating_add(p.ipv6_total))
                    as fn(&PoolFigures) -> i64,
            ),
            (
                "metallb_allocator_ipv4_addresses_total",
                "Number of usable IPV4 addresses, per pool",
                |p| p.ipv4_total,
            ),
            (
                "metallb_allocator_ipv6_addresses_total",
                "Number of usable IPV6 addresses, per pool",
                |p| p.ipv6_total,
            ),
            (
                "metallb_allocator_addresses_in_use_total",
                "Number of IP addresses in use, per pool",
                |p| p.ipv4_in_use.saturating_add(p.ipv6_in_use),
            ),
            (
                "metallb_allocator_ipv4_addresses_in_use_total",
                "Number of IPV4 addresses in use, per pool",
                |p| p.ipv4_in_use,
            ),
            (
                "metallb_allocator_ipv6_addresses_in_use_total",
                "Number of IPV6 addresses in use, per pool",
                |p| p.ipv6_in_use,
            ),
            (
                "metallb_allocator_services_allocated_total",
                "Number of services allocated, per pool",
                |p| i64::try_from(p.services).unwrap_or(i64::MAX),
            ),
        ] {
            family(&mut enc, name, help, pools, value)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::Scrape;

    #[test]
    fn per_pool_gauges_with_metallb_names() {
        let m = AllocatorMetrics {
            pools: vec![PoolFigures {
                pool: "blue".into(),
                ipv4_total: 4,
                ipv6_total: 2,
                ipv4_in_use: 4,
                ipv6_in_use: 1,
                services: 5,
            }],
        };
        let text = Scrape::new().with(m).render();
        for line in [
            "# TYPE metallb_allocator_addresses_total gauge",
            "metallb_allocator_addresses_total{pool=\"blue\"} 6",
            "metallb_allocator_ipv4_addresses_total{pool=\"blue\"} 4",
            "metallb_allocator_ipv6_addresses_total{pool=\"blue\"} 2",
            "metallb_allocator_addresses_in_use_total{pool=\"blue\"} 5",
            "metallb_allocator_ipv4_addresses_in_use_total{pool=\"blue\"} 4",
            "metallb_allocator_ipv6_addresses_in_use_total{pool=\"blue\"} 1",
            "metallb_allocator_services_allocated_total{pool=\"blue\"} 5",
        ] {
            assert!(text.contains(line), "{line} not in\n{text}");
        }
    }
}

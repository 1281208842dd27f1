//! Conflicting claims on a VIP this node announces, reported once per VIP change rather than
//! once per packet. After a partition heals, both sides' announcers hear the other's
//! gratuitous rounds and answers: issue 23's runs logged 98-220 `vip_claimed_elsewhere`
//! warnings per speaker per heal. One line per VIP is enough to say what happened; the count
//! rides on the next line.
//!
//! A claim is reported when it is the first for the VIP since this node took or released it,
//! when another MAC than those already reported claims it, or when [`REMIND_AFTER`] passed
//! since the last report (a conflict that lasts is not forgotten). Pure: time comes in.

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;
use std::time::{Duration, Instant};
use vigil_l2::wire::ethernet::Address as EthernetAddress;

/// A conflict that goes on is reported again this often, with its count.
pub const REMIND_AFTER: Duration = Duration::from_secs(60);

/// What has been heard about one VIP since its last change here.
#[derive(Debug, Clone)]
struct Heard {
    macs: BTreeSet<EthernetAddress>,
    /// Claims heard since the last report.
    unreported: u64,
    reported_at: Instant,
}

/// The claims per VIP (see the [module docs](self)).
#[derive(Debug, Clone, Default)]
pub struct ClaimLog {
    heard: BTreeMap<IpAddr, Heard>,
}

impl ClaimLog {
    /// `by` claimed `vip` at `now`. `Some(n)`: report it now, `n` claims heard for the VIP
    /// since the last report (this one included); `None`: counted, not reported.
    pub fn claimed(&mut self, now: Instant, vip: IpAddr, by: EthernetAddress) -> Option<u64> {
        let heard = self.heard.entry(vip).or_insert_with(|| Heard {
            macs: BTreeSet::new(),
            unreported: 0,
            reported_at: now,
        });
        heard.unreported += 1;
        // The first claim since the last change is a new MAC too.
        let new_mac = heard.macs.insert(by);
        if new_mac || now.saturating_duration_since(heard.reported_at) >= REMIND_AFTER {
            let n = heard.unreported;
            heard.unreported = 0;
            heard.reported_at = now;
            Some(n)
        } else {
            None
        }
    }

    /// `vip` was taken or released here: its next claim is news again.
    pub fn changed(&mut self, vip: IpAddr) {
        self.heard.remove(&vip);
    }

    /// VIPs with claims on record (bounded by the VIPs this node announced).
    pub fn len(&self) -> usize {
        self.heard.len()
    }

    /// Whether no claim is on record.
    pub fn is_empty(&self) -> bool {
        self.heard.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const VIP: IpAddr = IpAddr::V4(std::net::Ipv4Addr::new(198, 18, 0, 200));
    const MAC_B: EthernetAddress = EthernetAddress([2, 0, 0, 0, 0, 0xb]);
    const MAC_C: EthernetAddress = EthernetAddress([2, 0, 0, 0, 0, 0xc]);

    #[test]
    fn a_storm_of_claims_is_one_line_per_vip_change() {
        let t0 = Instant::now();
        let mut log = ClaimLog::default();
        let ms = Duration::from_millis(1);
        // A heal: 200 conflicting packets in two seconds from one MAC: one report.
        let reports: Vec<u64> = (0..200)
            .filter_map(|i| log.claimed(t0 + i * 10 * ms, VIP, MAC_B))
            .collect();
        assert_eq!(reports, vec![1]);
        // Another MAC is news.
        assert_eq!(log.claimed(t0 + 2_000 * ms, VIP, MAC_C), Some(200));
        assert_eq!(log.claimed(t0 + 2_010 * ms, VIP, MAC_B), None);
        // A lasting conflict is reminded of, with its count.
        assert_eq!(
            log.claimed(t0 + 2_000 * ms + REMIND_AFTER, VIP, MAC_B),
            Some(2)
        );
        // The VIP changes hands here: the next claim is reported again.
        log.changed(VIP);
        assert!(log.is_empty());
        assert_eq!(log.claimed(t0 + REMIND_AFTER * 2, VIP, MAC_B), Some(1));
    }
}

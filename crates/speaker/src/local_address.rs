//! `announce.local_address`: the owner holds each VIP it announces as a single-host address
//! on a device (normally `lo`), so that the kernel accepts the clients' traffic to it.
//!
//! The address goes on when the VIP is taken, before the gratuitous announcements; it comes
//! off when the VIP is released (after the handover to a successor completes) and on exit.
//! At start, addresses of configured VIPs left on the device by a crashed run are removed.
//! Since a crashed speaker leaves its addresses behind, and Linux by default answers ARP for
//! any local address on any interface, the start also makes the ARP sysctls strict (or checks
//! them, with `announce.arp_sysctls: check`). Failures are logged and counted, never fatal
//! after start.

use crate::model::{ArpSysctls as ArpSysctlsMode, LocalAddressSettings};
use std::collections::BTreeSet;
use std::net::IpAddr;
use tracing::{info, warn};
use vigil_l2_net::Selection;
use vigil_l2_net::address::{self, ArpSysctls, Outcome};
use vigil_l2_net::netlink::{self, Event};

/// Counters for `/metrics`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AddressCounters {
    /// Addresses added (or found already there) on taking a VIP.
    pub added: u64,
    /// Addresses removed (or found already gone) on releasing a VIP, at start and on exit.
    pub removed: u64,
    /// Adds that failed.
    pub add_failed: u64,
    /// Removes that failed.
    pub remove_failed: u64,
}

/// The VIPs this node holds on its local-address device.
#[derive(Debug)]
pub struct LocalAddresses {
    device: String,
    /// VIPs put on the device by this run and not yet taken off.
    held: BTreeSet<IpAddr>,
    counters: AddressCounters,
}

impl LocalAddresses {
    /// Prepares the device named by `announce.local_address`, if set: it must exist; the ARP
    /// sysctls are set (or checked) on `all` and the interfaces the announcer would use now;
    /// every desired VIP (`vips`) left on the device by an earlier run is removed. Errors name
    /// the field at fault and stop the start. Blocking (netlink and sysctl round trips).
    pub fn start(
        settings: Option<&LocalAddressSettings>,
        selection: &Selection,
        vips: &BTreeSet<IpAddr>,
    ) -> Result<Option<Self>, String> {
        let Some(LocalAddressSettings {
            device,
            arp_sysctls,
        }) = settings
        else {
            return Ok(None);
        };
        address::interface_index(device)
            .map_err(|e| format!("announce.local_address: {e} (create it, or use lo)"))?;
        let interfaces = announcing_interfaces(selection, device)?;
        match arp_sysctls {
            ArpSysctlsMode::Set => set_sysctls(&interfaces)?,
            ArpSysctlsMode::Check => check_sysctls(&interfaces)?,
        }
        let mut this = Self {
            device: device.clone(),
            held: BTreeSet::new(),
            counters: AddressCounters::default(),
        };
        for &vip in vips {
            if let Some(Outcome::Done) = this.remove_address(vip, "start") {
                info!(event = "local_address_stale_removed", vip = %vip, device = %this.device, "removed a VIP an earlier run left on the device");
            }
        }
        Ok(Some(this))
    }

    /// Puts `vip` on the device (an address already there is fine).
    pub fn take(&mut self, vip: IpAddr) {
        let index = match address::interface_index(&self.device) {
            Ok(i) => i,
            Err(e) => {
                self.counters.add_failed += 1;
                warn!(event = "local_address_failed", op = "add", vip = %vip, device = %self.device, error = %e, "cannot add the VIP to the device");
                return;
            }
        };
        match address::add_host_address(index, vip) {
            Ok(outcome) => {
                self.counters.added += 1;
                self.held.insert(vip);
                info!(event = "local_address_added", vip = %vip, device = %self.device, already = outcome == Outcome::Unchanged, "VIP added to the device");
            }
            Err(e) => {
                self.counters.add_failed += 1;
                warn!(event = "local_address_failed", op = "add", vip = %vip, device = %self.device, error = %e, "cannot add the VIP to the device");
            }
        }
    }

    /// Takes `vip` off the device if this run put it there.
    pub fn release(&mut self, vip: IpAddr, why: &str) {
        if self.held.contains(&vip) && self.remove_address(vip, why).is_some() {
            info!(event = "local_address_removed", vip = %vip, device = %self.device, trigger = why, "VIP removed from the device");
        }
    }

    /// Takes every VIP this run put on the device off it (on exit).
    pub fn release_all(&mut self) {
        for vip in self.held.clone() {
            self.release(vip, "stop");
        }
    }

    /// The VIPs this run holds on the device.
    pub fn held(&self) -> &BTreeSet<IpAddr> {
        &self.held
    }

    /// The counters so far.
    pub fn counters(&self) -> AddressCounters {
        self.counters
    }

    fn remove_address(&mut self, vip: IpAddr, why: &str) -> Option<Outcome> {
        let result = address::interface_index(&self.device)
            .and_then(|i| address::remove_host_address(i, vip));
        match result {
            Ok(outcome) => {
                self.counters.removed += 1;
                self.held.remove(&vip);
                Some(outcome)
            }
            Err(e) => {
                self.counters.remove_failed += 1;
                warn!(event = "local_address_failed", op = "remove", vip = %vip, device = %self.device, trigger = why, error = %e, "cannot remove the VIP from the device");
                None
            }
        }
    }
}

/// The interfaces the announcer would answer on now (by the same selection rules), which
/// must not include the local-address device itself.
fn announcing_interfaces(selection: &Selection, device: &str) -> Result<Vec<String>, String> {
    let events = netlink::dump(std::time::Duration::from_secs(2))
        .map_err(|e| format!("announce.local_address: cannot list interfaces: {e}"))?;
    let mut names = Vec::new();
    for event in events {
        if let Event::Link(link) = event
            && selection.qualify(&link, true).is_ok()
        {
            if link.name == device {
                return Err(format!(
                    "announce.local_address: {device:?} is an interface VIPs are announced on: \
                     a host whose speaker stopped would keep answering for them there; use lo \
                     or a dummy device, or leave it out with interfaces.include/exclude"
                ));
            }
            names.push(link.name);
        }
    }
    Ok(names)
}

fn set_sysctls(interfaces: &[String]) -> Result<(), String> {
    for device in std::iter::once("all").chain(interfaces.iter().map(String::as_str)) {
        let before = address::read_arp_sysctls(device).ok();
        address::write_arp_sysctls(device, ArpSysctls::SAFE).map_err(|e| {
            format!(
                "announce.arp_sysctls: cannot set net.ipv4.conf.{device}.arp_ignore=1 and \
                 arp_announce=2: {e} (vigil needs CAP_NET_ADMIN and a writable /proc/sys, or \
                 set them yourself and use arp_sysctls: check)"
            )
        })?;
        info!(
            event = "arp_sysctls_set",
            device,
            arp_ignore = ArpSysctls::SAFE.arp_ignore,
            arp_announce = ArpSysctls::SAFE.arp_announce,
            was = ?before.map(|b| (b.arp_ignore, b.arp_announce)),
            "set net.ipv4.conf.<device>.arp_ignore/arp_announce so that a host holding a VIP on another device never answers ARP for it"
        );
    }
    Ok(())
}

fn check_sysctls(interfaces: &[String]) -> Result<(), String> {
    let read = |device: &str| {
        address::read_arp_sysctls(device)
            .map_err(|e| format!("announce.arp_sysctls: cannot read net.ipv4.conf.{device}: {e}"))
    };
    let all = read("all")?;
    // With no announcing interface up yet, `all` alone decides for those to come.
    let all_only = ["all".to_string()];
    let devices = if interfaces.is_empty() {
        &all_only[..]
    } else {
        interfaces
    };
    for device in devices {
        let values = ArpSysctls::effective(all, read(device)?);
        if !values.is_safe() {
            return Err(format!(
                "announce.arp_sysctls is check, but on {device} arp_ignore is {} and arp_announce \
                 is {} (the larger of all's and the device's): a host holding a VIP on \
                 announce.local_address would answer ARP for it; set \
                 net.ipv4.conf.all.arp_ignore=1 and net.ipv4.conf.all.arp_announce=2",
                values.arp_ignore, values.arp_announce
            ));
        }
    }
    info!(
        event = "arp_sysctls_checked",
        interfaces = interfaces.len(),
        "arp_ignore/arp_announce are strict enough"
    );
    Ok(())
}

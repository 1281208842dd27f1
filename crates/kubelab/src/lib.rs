//! Test support for everything Kubernetes: a real control plane (`vigil-testenv`, the real
//! kube-apiserver over an embedded etcd, built by `conformance/build.sh testenv`) running in a
//! host of a [`vigil_netlab`] lab, reachable by every lab host over the bridge, and a kube
//! client for the test whose sockets are opened inside the lab.
//!
//! ```no_run
//! use vigil_kubelab::{KubeLab, ControlPlaneConfig, TestNode, create_node};
//! let Some(lab) = KubeLab::start("kl-doc", "doc", ControlPlaneConfig::default()) else {
//!     return; // skipped: no root, or no vigil-testenv
//! };
//! let client = lab.cp().client().unwrap();
//! lab.cp().block_on(async {
//!     let node = TestNode::new("n1").internal_ip("198.18.0.11".parse().unwrap());
//!     create_node(&client, &node).await.unwrap();
//! });
//! ```
//!
//! Nothing is added to the root namespace: the test's kube client runs on a [`LabRuntime`]
//! whose threads joined the control plane's namespace. Processes are stopped by PID when
//! their guard drops, also when a test panics.

mod arp;
mod binary;
pub mod cluster;
mod control_plane;
pub mod deploy;
mod error;
mod fixtures;
mod manifests;
pub mod metallb;
mod runtime;

pub use arp::{ArpAnswer, arp_ask};
pub use binary::{TESTENV_BIN, testenv_binary};
pub use control_plane::{ControlPlane, ControlPlaneConfig, StaticToken};
pub use error::Error;
pub use fixtures::{
    TestEndpoint, TestNode, TestPod, TestService, TestSlice, create_endpoint_slice, create_node,
    create_pod, create_service, ensure_namespace, set_node_condition, set_pod_status,
};
pub use manifests::{
    FIELD_MANAGER, apply_crds, apply_yaml, apply_yaml_file, documents, wait_crd_established,
};
pub use metallb::{MetalLbBinaries, MetalLbSpeaker, metallb_binaries};
pub use runtime::LabRuntime;

use vigil_netlab::Bridge;

/// A lab with a control plane in it: a netlab [`Bridge`] plus a [`ControlPlane`] on host
/// `config.host`. More hosts can be plugged into [`Self::bridge_mut`].
#[derive(Debug)]
pub struct KubeLab {
    // Declared first so it is dropped first: the control plane stops before its namespace
    // goes away.
    cp: ControlPlane,
    bridge: Bridge,
}

impl KubeLab {
    /// Builds a lab (namespace prefix from `tag`) and starts the control plane in it, or
    /// returns `None` when `test` must skip (not root, or no `vigil-testenv`; failures
    /// instead under `VIGIL_REQUIRE_ROOT=1` / `VIGIL_REQUIRE_GO=1`). Panics when the control
    /// plane does not come up.
    pub fn start(tag: &str, test: &str, config: ControlPlaneConfig) -> Option<Self> {
        if !vigil_netlab::root_or_skip(test) {
            return None;
        }
        let binary = testenv_binary(test)?;
        let mut bridge = Bridge::new(tag);
        let cp = ControlPlane::start(&mut bridge, &binary, &config)
            .unwrap_or_else(|e| panic!("{test}: control plane: {e}"));
        Some(Self { cp, bridge })
    }

    /// The control plane.
    pub fn cp(&self) -> &ControlPlane {
        &self.cp
    }

    /// The control plane, for stop/restart/pause.
    pub fn cp_mut(&mut self) -> &mut ControlPlane {
        &mut self.cp
    }

    /// The lab's bridge and hosts.
    pub fn bridge(&self) -> &Bridge {
        &self.bridge
    }

    /// The lab's bridge, to add hosts.
    pub fn bridge_mut(&mut self) -> &mut Bridge {
        &mut self.bridge
    }
}

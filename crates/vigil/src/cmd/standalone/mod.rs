//! `vigil standalone --config FILE`: the speaker without Kubernetes, configured from a YAML
//! file, like keepalived with N nodes sharing many VIPs.

pub mod config;

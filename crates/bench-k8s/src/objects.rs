//! The Kubernetes objects the bench makes and removes: LoadBalancer Services asking for one
//! IP each (`metallb.io/loadBalancerIPs`, honoured by both controllers) with a ready endpoint
//! on every speaker node, and the ServiceL2Status objects the speakers write.

use std::net::{IpAddr, Ipv4Addr};

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams};
use vigil_kubelab::metallb::METALLB_NAMESPACE;
use vigil_kubelab::{
    TestEndpoint, TestService, TestSlice, create_endpoint_slice, create_service, ensure_namespace,
};

use crate::lab::Bench;

/// The endpoint slice of Service `name`, one ready endpoint per node.
fn slice(bench: &Bench, ns: &str, name: &str) -> TestSlice {
    let mut slice = TestSlice::for_service(ns, name);
    for (i, node) in bench.nodes().into_iter().enumerate() {
        let ip = Ipv4Addr::new(198, 18, 2, 10 + u8::try_from(i).expect("few nodes"));
        slice = slice.endpoint(TestEndpoint::ready(IpAddr::V4(ip), node));
    }
    slice
}

/// The Service `name` asking for `ip`.
fn service(ns: &str, name: &str, ip: Ipv4Addr) -> TestService {
    TestService::load_balancer(ns, name).annotation("metallb.io/loadBalancerIPs", &ip.to_string())
}

/// Creates the endpoint slice of `name` (before its Service, so the Service is announceable
/// the moment it exists).
pub(crate) fn create_slice(bench: &Bench, ns: &str, name: &str) -> Result<(), String> {
    let client = bench.kube.clone();
    let slice = slice(bench, ns, name);
    bench
        .lab
        .cp()
        .block_on(async move { create_endpoint_slice(&client, &slice).await.map(|_| ()) })
        .map_err(|e| format!("endpoint slice {ns}/{name}: {e}"))
}

/// Creates Service `name` asking for `ip`.
pub(crate) fn create_lb_service(
    bench: &Bench,
    ns: &str,
    name: &str,
    ip: Ipv4Addr,
) -> Result<(), String> {
    let client = bench.kube.clone();
    let svc = service(ns, name, ip);
    bench
        .lab
        .cp()
        .block_on(async move { create_service(&client, &svc).await.map(|_| ()) })
        .map_err(|e| format!("service {ns}/{name}: {e}"))
}

/// Creates `count` Services (with slices) `s<i>` asking for `first + i`, `parallel` at a time.
pub(crate) fn create_many(
    bench: &Bench,
    ns: &str,
    first: Ipv4Addr,
    count: usize,
    parallel: usize,
) -> Result<(), String> {
    let base = u32::from(first);
    let jobs: Vec<(String, Ipv4Addr, TestSlice)> = (0..count)
        .map(|i| {
            let name = format!("s{i}");
            let ip = Ipv4Addr::from(base + u32::try_from(i).expect("count fits"));
            let slice = slice(bench, ns, &name);
            (name, ip, slice)
        })
        .collect();
    let client = bench.kube.clone();
    let ns = ns.to_string();
    bench.lab.cp().block_on(async move {
        futures::stream::iter(jobs)
            .map(|(name, ip, slice)| {
                let client = client.clone();
                let ns = ns.clone();
                async move {
                    create_endpoint_slice(&client, &slice).await?;
                    create_service(&client, &service(&ns, &name, ip)).await?;
                    Ok::<_, vigil_kubelab::Error>(())
                }
            })
            .buffer_unordered(parallel.max(1))
            .try_collect::<Vec<()>>()
            .await
            .map(|_| ())
            .map_err(|e| format!("creating services: {e}"))
    })
}

/// Deletes every Service and EndpointSlice in `ns`. Each collection is tried up to three
/// times: a `deletecollection` of thousands of Services can fail part-way (seen at 5,000 with
/// MetalLB's controller writing), and the slices must go even then.
pub(crate) fn delete_all(bench: &Bench, ns: &str) -> Result<(), String> {
    let services: Api<Service> = Api::namespaced(bench.kube.clone(), ns);
    let slices: Api<EndpointSlice> = Api::namespaced(bench.kube.clone(), ns);
    bench.lab.cp().block_on(async move {
        let mut errors = Vec::new();
        for attempt in 1..=3 {
            match services
                .delete_collection(&DeleteParams::default(), &ListParams::default())
                .await
            {
                Ok(_) => break,
                Err(e) => errors.push(format!("Services, attempt {attempt}: {e}")),
            }
        }
        for attempt in 1..=3 {
            match slices
                .delete_collection(&DeleteParams::default(), &ListParams::default())
                .await
            {
                Ok(_) => break,
                Err(e) => errors.push(format!("slices, attempt {attempt}: {e}")),
            }
        }
        if errors.is_empty() {
            Ok(())
        } else {
            Err(format!("deleting in {ns}: {}", errors.join("; ")))
        }
    })
}

fn statuses_api(bench: &Bench) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk("metallb.io", "v1beta1", "ServiceL2Status");
    let resource = ApiResource::from_gvk_with_plural(&gvk, "servicel2statuses");
    Api::namespaced_with(bench.kube.clone(), METALLB_NAMESPACE, &resource)
}

/// How many ServiceL2Status objects name a Service of `ns`.
pub(crate) fn count_statuses(bench: &Bench, ns: &str) -> Result<usize, String> {
    let api = statuses_api(bench);
    let list = bench
        .lab
        .cp()
        .block_on(async move { api.list(&ListParams::default()).await })
        .map_err(|e| format!("listing ServiceL2Status: {e}"))?;
    Ok(list
        .items
        .iter()
        .filter(|o| o.data["status"]["serviceNamespace"].as_str() == Some(ns))
        .count())
}

/// Deletes every ServiceL2Status left behind (a stopped system's).
pub(crate) fn delete_statuses(bench: &Bench) -> Result<(), String> {
    let api = statuses_api(bench);
    bench
        .lab
        .cp()
        .block_on(async move {
            api.delete_collection(&DeleteParams::default(), &ListParams::default())
                .await
                .map(|_| ())
        })
        .map_err(|e| format!("deleting ServiceL2Status: {e}"))
}

/// Makes namespace `ns` if it is missing.
pub(crate) fn ensure_ns(bench: &Bench, ns: &str) -> Result<(), String> {
    let client = bench.kube.clone();
    let name = ns.to_string();
    bench
        .lab
        .cp()
        .block_on(async move { ensure_namespace(&client, &name).await.map(|_| ()) })
        .map_err(|e| format!("namespace {ns}: {e}"))
}

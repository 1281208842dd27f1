//! `vigil lab --kubernetes`: the failover demonstration in Kubernetes mode. The standalone
//! lab's network (a bridge, a client, N hosts) gets one more host running a real
//! kube-apiserver over etcd (vigil-testenv); `vigil controller` allocates the IP of Service
//! `demo/web` from an IPAddressPool, every host runs `vigil speaker` with a kubeconfig, and
//! the client asks for the IP by ARP every 10 ms while the owner fails as in the standalone
//! lab. With `--scenario api-down` the API server is stopped before the owner's host goes,
//! and started again afterwards.
//!
//! - [`cluster`]: the API server, the controller and the lab, owned by one guard;
//! - [`objects`]: what goes into the API server and what is read back;
//! - [`tables`]: `kubectl get` tables, as the API server prints them.
//!
//! The scenarios, the prober, the outage and the report are the standalone lab's.

mod cluster;
mod objects;
mod tables;

pub(crate) use cluster::control_plane_dir;

use std::ffi::OsString;
use std::net::{Ipv4Addr, SocketAddr};
use std::time::{Duration, Instant};

use vigil_l2::wire::ethernet::Address as Mac;

use super::cluster::{CLIENT4, CLIENT6, Lab, write_private};
use super::demo::{Steps, await_takeover, describe, fail_owner, ms, owner_of, timeline_block};
use super::probe::{Family, Prober, Questions};
use super::{Args, Scenario, Stop, check_interrupt, pause};
use crate::cmd::status::render;
use cluster::KubeCluster;
use objects::{METALLB_NS, POOL_RANGE, POOL_RANGE6, SERVICE, SERVICE_NS};
use vigil_kubelab::deploy::{MEMBERLIST_SECRET, Program};

/// Asks the speaker at `addr` in `ns` for its status on its metrics port: HTTPS, with the
/// lab's scraper token (the speaker reviews it, as MetalLB's metrics port does).
fn speaker_status(
    ns: &str,
    addr: SocketAddr,
) -> Result<crate::cmd::standalone::state::Status, String> {
    let answer = vigil_kubelab::cluster::https_get(
        ns,
        addr,
        "/status",
        Some(vigil_kubelab::cluster::SCRAPER_TOKEN),
    )
    .map_err(|e| format!("{ns}: /status: {e}"))?;
    if answer.status != 200 {
        return Err(format!("{ns}: /status answered {}", answer.status));
    }
    serde_json::from_str(&answer.body).map_err(|e| format!("{ns}: bad /status: {e}"))
}

/// The port each speaker serves `/status` and `/metrics` on (HTTPS, every address).
const SPEAKER_PORT: u16 = 7472;
/// Bounds on the waits (generous: the machine may be busy).
const ALLOCATE_LIMIT: Duration = Duration::from_secs(60);
const SETTLE_LIMIT: Duration = Duration::from_secs(60);
const STATUS_LIMIT: Duration = Duration::from_secs(60);

/// The whole demonstration.
pub(super) fn demo(args: &Args) -> Result<(), Stop> {
    let exe = std::env::current_exe()
        .map_err(|e| Stop::failed(format!("cannot find the vigil executable: {e}")))?;
    // Everything that can be missing is looked for before anything is made.
    let testenv = cluster::find_testenv()?;
    let nodes = usize::from(args.nodes);
    let steps = Steps {
        start: Instant::now(),
    };
    println!(
        "vigil lab --kubernetes: {nodes} hosts, scenario {}, profile {} (namespaces {}-*)",
        args.scenario.name(),
        args.profile.name(),
        args.prefix
    );

    let lab = Lab::create(&args.prefix, nodes)?;
    steps.say(&format!(
        "network: bridge, client {CLIENT4}, hosts {}..{} on 198.18.0.0/24",
        super::cluster::host_ip(1),
        super::cluster::host_ip(nodes)
    ));
    let mut k = KubeCluster::start(lab, &testenv)?;
    check_interrupt()?;
    steps.say(&format!(
        "API server ready at {} (kube-apiserver and etcd in one process: {})",
        k.cp.server_url(),
        testenv.display()
    ));
    let client =
        k.cp.client()
            .map_err(|e| Stop::failed(format!("admin client: {e}")))?;
    let hosts: Vec<(String, Ipv4Addr)> =
        k.lab.hosts.iter().map(|h| (h.name.clone(), h.ip)).collect();
    let installed = k.cp.block_on(objects::install(&client, &hosts))?;
    steps.say(&format!(
        "applied vigil's {} CRDs and {} RBAC objects (deploy/kubernetes/base: the speaker and \
         the controller run as their ServiceAccounts), a Node and a speaker Pod per host, \
         IPAddressPool lab ({POOL_RANGE} and {POOL_RANGE6}), L2Advertisement lab (eth0) and Service \
         {SERVICE_NS}/{SERVICE} (type LoadBalancer, an endpoint on every node)",
        installed.crds.len(),
        installed.rbac.len()
    ));

    k.start_controller(&exe)?;
    let key = wait_for(
        &mut k,
        "vigil controller to create the memberlist Secret",
        ALLOCATE_LIMIT,
        |k| k.cp.block_on(objects::memberlist_secret(&client)),
    )?;
    let key_dir = k.lab.dir.join("memberlist");
    std::fs::create_dir(&key_dir)
        .map_err(|e| Stop::failed(format!("{}: {e}", key_dir.display())))?;
    write_private(&key_dir.join("secretkey"), &key)?;
    let vips = wait_for(
        &mut k,
        "vigil controller to allocate an IPv4 and an IPv6 address",
        ALLOCATE_LIMIT,
        |k| k.cp.block_on(objects::ingress(&client)),
    )?;
    let (vip, vip6) = (vips.v4, vips.v6);
    steps.say(&format!(
        "vigil controller (pid {}) made the memberlist Secret (a random key, in no file of the \
         lab's) and gave {SERVICE_NS}/{SERVICE} {vip} and {vip6}:",
        k.controller_pid.unwrap_or_default()
    ));
    show(
        &k,
        &client,
        &format!("kubectl get ipaddresspools -n {METALLB_NS}"),
        &format!("/apis/metallb.io/v1beta1/namespaces/{METALLB_NS}/ipaddresspools"),
    );
    show(
        &k,
        &client,
        &format!("kubectl get services -n {SERVICE_NS}"),
        &format!("/api/v1/namespaces/{SERVICE_NS}/services"),
    );

    start_speakers(&mut k, &exe, &key_dir, args)?;
    steps.say(&format!(
        "started `vigil speaker` on {nodes} hosts (MetalLB's flags, the speaker \
         ServiceAccount's kubeconfig, the Secret's key as a file; logs in {})",
        k.lab.dir.display()
    ));

    let prober = Prober::start(Questions {
        ns: k.lab.client_ns(),
        ifindex: k.lab.client.0,
        mac: k.lab.client.1,
        src4: CLIENT4,
        src6: CLIENT6,
        vip4: vip,
        vip6: Some(vip6),
        interval: Duration::from_millis(10),
        limit: SETTLE_LIMIT
            + args.profile.takeover_limit()
            + STATUS_LIMIT
            + Duration::from_secs(120),
    })
    .map_err(|e| Stop::failed(format!("cannot start the client's prober: {e}")))?;
    let names: Vec<&str> = hosts.iter().map(|(n, _)| n.as_str()).collect();
    let ranked: Vec<String> = vigil_lb::rank(names.iter().copied(), vip.into())
        .into_iter()
        .map(str::to_string)
        .collect();
    steps.say(&format!(
        "waiting until the client hears one host answer for {vip} and {vip6} and its \
         ServiceL2Status names it (at most {} s); MetalLB's election ranks {}",
        SETTLE_LIMIT.as_secs(),
        ranked.join(", ")
    ));
    let owner = settle(&mut k, &client, &prober, vip, nodes)?;
    let owner_host = k.lab.host(&owner).ok_or("the owner is not a lab host")?;
    let (owner_mac, owner_ip) = (owner_host.mac, owner_host.ip);
    let agrees = if ranked.first() == Some(&owner) {
        "as MetalLB's election ranks it".to_string()
    } else {
        format!("(MetalLB's election would pick {})", ranked[0])
    };
    steps.say(&format!(
        "settled: {owner} announces {vip} and {vip6}, {agrees}; the client hears it at {owner_mac}:"
    ));
    show(
        &k,
        &client,
        &format!("kubectl get servicel2statuses -n {METALLB_NS}"),
        &format!("/apis/metallb.io/v1beta1/namespaces/{METALLB_NS}/servicel2statuses"),
    );
    if let Ok(s) = speaker_status(
        &k.lab.host(&owner).map(|h| h.ns.clone()).unwrap_or_default(),
        SocketAddr::from((owner_ip, SPEAKER_PORT)),
    ) {
        Steps::block(&format!("{owner}'s own view (`vigil status`):"));
        Steps::block(&render(&s));
    }

    let mut summary = format!(
        "result: mode=kubernetes scenario={} profile={} nodes={nodes} vip={vip} vip6={vip6} old_owner={owner}",
        args.scenario.name(),
        args.profile.name()
    );
    if args.scenario != Scenario::None {
        let fields = fail_over(
            args, &mut k, &client, &prober, &steps, &owner, owner_mac, vips,
        )?;
        summary.push_str(&fields);
    }
    drop(prober);
    println!("{summary}");
    let n = k.teardown();
    steps.say(&format!(
        "torn down: the speakers, the controller, the API server (and its data) and {n} namespaces are gone"
    ));
    Ok(())
}

/// Shows a `kubectl get` table under the steps, or why it could not be had.
fn show(k: &KubeCluster, client: &kube::Client, command: &str, path: &str) {
    match k.cp.block_on(tables::get(client, path)) {
        // A blank line after each table ends it.
        Ok(table) => Steps::block(&format!("$ {command}\n{}\n", tables::render(&table))),
        Err(e) => Steps::block(&format!("$ {command}\n(failed: {e})\n\n")),
    }
}

/// Polls `probe` every 200 ms until it gives a value (at most `limit`); stops early when the
/// controller exits or a signal came.
fn wait_for<T>(
    k: &mut KubeCluster,
    what: &str,
    limit: Duration,
    mut probe: impl FnMut(&KubeCluster) -> Result<Option<T>, String>,
) -> Result<T, Stop> {
    let start = Instant::now();
    let mut last_error = String::new();
    loop {
        check_interrupt()?;
        if let Some(exit) = k.controller_exited() {
            return Err(Stop::failed(format!(
                "vigil controller exited ({exit}).\n{}",
                k.log_tails(10)
            )));
        }
        match probe(k) {
            Ok(Some(value)) => return Ok(value),
            Ok(None) => {}
            Err(e) => last_error = format!(" (last error: {e})"),
        }
        if start.elapsed() > limit {
            return Err(Stop::failed(format!(
                "timed out after {} s waiting for {what}{last_error}.\n{}",
                limit.as_secs(),
                k.log_tails(5)
            )));
        }
        pause(Duration::from_millis(200))?;
    }
}

/// `vigil speaker` on every host: MetalLB's speaker flags, the speaker ServiceAccount's
/// kubeconfig, the Secret's key as a file (as its volume would mount it).
fn start_speakers(
    k: &mut KubeCluster,
    exe: &std::path::Path,
    key_dir: &std::path::Path,
    args: &Args,
) -> Result<(), Stop> {
    let kubeconfig = k.kubeconfig(Program::Speaker)?;
    for i in 0..k.lab.hosts.len() {
        let (name, ip) = (k.lab.hosts[i].name.clone(), k.lab.hosts[i].ip);
        let flags: Vec<OsString> = vec![
            "speaker".into(),
            format!("--kubeconfig={}", kubeconfig.display()).into(),
            format!("--namespace={METALLB_NS}").into(),
            format!("--node-name={name}").into(),
            format!("--pod-name=speaker-{name}").into(),
            format!("--ml-bindaddr={ip}").into(),
            format!("--ml-labels={}", objects::speaker_label_selector()).into(),
            format!("--ml-secret-key-path={}", key_dir.display()).into(),
            format!("--port={SPEAKER_PORT}").into(),
            "--log-level=info".into(),
            format!("--profile={}", args.profile.name()).into(),
        ];
        // The Secret the speaker follows for key rotation (as the DaemonSet sets it).
        let env = [("METALLB_ML_SECRET_NAME", MEMBERLIST_SECRET)];
        k.lab.start_speaker(i, exe, &flags, &env)?;
    }
    Ok(())
}

/// Waits until every speaker sees all `n` members alive, the client hears exactly one host
/// answer for `vip` (three rounds in a row), and the ServiceL2Status objects name exactly that
/// host. The owner.
fn settle(
    k: &mut KubeCluster,
    client: &kube::Client,
    prober: &Prober,
    vip: Ipv4Addr,
    n: usize,
) -> Result<String, Stop> {
    let start = Instant::now();
    let mut waiting_for;
    loop {
        check_interrupt()?;
        if let Some((host, exit)) = k.lab.exited().into_iter().next() {
            return Err(Stop::failed(format!(
                "{host}'s speaker exited ({exit}).\n{}",
                k.log_tails(10)
            )));
        }
        if let Some(why) = prober.stopped() {
            return Err(Stop::failed(why));
        }
        let heard: Vec<Mac> = {
            let len = prober.len();
            let last = prober.rounds_from(len.saturating_sub(3));
            // The same one MAC for both families, three rounds in a row.
            match last.as_slice() {
                [a, b, c]
                    if a.v4.len() == 1
                        && [&a.v4, &a.v6, &b.v4, &b.v6, &c.v4, &c.v6]
                            .iter()
                            .all(|m| **m == a.v4) =>
                {
                    a.v4.clone()
                }
                _ => Vec::new(),
            }
        };
        let answering = heard
            .first()
            .and_then(|m| k.lab.host_by_mac(*m))
            .map(|h| h.name.clone());
        match answering {
            None => {
                waiting_for =
                    format!("the client to hear one host answer for {vip} and its IPv6 twin")
            }
            Some(owner) => {
                waiting_for = match k.cp.block_on(objects::status_nodes(client)) {
                    Ok(nodes) if nodes == [owner.clone()] => match alive_members(k, &owner) {
                        Some(alive) if alive == n => return Ok(owner),
                        Some(alive) => {
                            format!("{owner} to see {n} members alive (it sees {alive})")
                        }
                        None => format!("{owner}'s /status"),
                    },
                    Ok(nodes) => format!(
                        "the ServiceL2Status objects to name {owner} alone (they name {nodes:?})"
                    ),
                    Err(e) => format!("the ServiceL2Status objects ({e})"),
                };
            }
        }
        if start.elapsed() > SETTLE_LIMIT {
            return Err(Stop::failed(format!(
                "the cluster did not settle within {} s: still waiting for {waiting_for}.\n\
                 Last log lines:\n{}",
                SETTLE_LIMIT.as_secs(),
                k.log_tails(5)
            )));
        }
        pause(Duration::from_millis(100))?;
    }
}

/// How many members `host`'s speaker sees alive, from its `/status`.
fn alive_members(k: &KubeCluster, host: &str) -> Option<usize> {
    let h = k.lab.host(host)?;
    let s = speaker_status(&h.ns, SocketAddr::from((h.ip, SPEAKER_PORT))).ok()?;
    Some(s.members.iter().filter(|m| m.state == "alive").count())
}

/// Fails the owner as the scenario says (for api-down: the API server first), waits for
/// another host to answer, shows the outage and the client's timeline, then the API's view
/// (after the API server is back, for api-down). The summary's fields.
#[allow(clippy::too_many_arguments)]
fn fail_over(
    args: &Args,
    k: &mut KubeCluster,
    client: &kube::Client,
    prober: &Prober,
    steps: &Steps,
    owner: &str,
    old_mac: Mac,
    vips: objects::Vips,
) -> Result<String, Stop> {
    let (vip, vip6) = (vips.v4, vips.v6);
    if args.scenario == Scenario::ApiDown {
        let exit =
            k.cp.stop()
                .map_or_else(|| "killed after 30 s".to_string(), |s| s.to_string());
        steps.say(&format!(
            "api-down: the API server is stopped (SIGTERM; {exit}): the speakers keep what they last read"
        ));
        // Let every watch see the connection go, so the failover runs without an API server
        // rather than racing its shutdown.
        pause(Duration::from_millis(500))?;
    }
    let failed_at = prober.now();
    let what = fail_owner(args.scenario, &mut k.lab, owner)?;
    steps.say(&format!("{what}; the client asks every 10 ms"));
    let (outage, outage6) = await_takeover(
        prober,
        failed_at,
        old_mac,
        true,
        args.profile.takeover_limit(),
    )
    .map_err(|e| match e {
        Stop::Failed(why) => Stop::failed(format!(
            "{why} (profile {}).\n{}",
            args.profile.name(),
            k.log_tails(5)
        )),
        interrupted => interrupted,
    })?;
    let name_of = |lab: &Lab, mac: Mac| {
        lab.host_by_mac(mac)
            .map_or_else(|| format!("an unknown host ({mac})"), |h| h.name.clone())
    };
    let new_owner = name_of(&k.lab, outage.new_mac);
    steps.say(&format!(
        "{vip} answers from {new_owner} ({}) {} ms after the failure{}",
        outage.new_mac,
        ms(outage.takeover),
        if args.scenario == Scenario::ApiDown {
            ", with the API server down"
        } else {
            ""
        }
    ));
    let outage6 = outage6.expect("asked for both families");
    Steps::block(&describe(&outage, vip.to_string()));
    Steps::block(&describe(&outage6, vip6.to_string()));
    if outage6.new_mac != outage.new_mac {
        Steps::block(&format!(
            "note: {vip6} moved to {} but {vip} to {new_owner}",
            k.lab.who(outage6.new_mac)
        ));
    }
    if args.scenario == Scenario::Graceful {
        let exit = k
            .lab
            .wait_exit(owner, Duration::from_secs(15))
            .unwrap_or_else(|| "still running after 15 s".into());
        Steps::block(&format!("{owner}'s speaker: {exit}"));
    }
    // A little of what came after, then the client's timeline around the failure.
    pause(Duration::from_millis(300))?;
    Steps::block(&timeline_block(
        prober,
        Family::V4,
        &vip.to_string(),
        failed_at,
        &outage,
        |mac| k.lab.who(mac),
    ));
    if let Some(h) = k.lab.host(&new_owner)
        && let Ok(s) = speaker_status(&h.ns, SocketAddr::from((h.ip, SPEAKER_PORT)))
        && owner_of(&s, &vip.to_string()).as_deref() == Some(new_owner.as_str())
    {
        steps.say(&format!("{new_owner}'s own view now (`vigil status`):"));
        Steps::block(&render(&s));
    }

    if args.scenario == Scenario::ApiDown {
        let started = Instant::now();
        k.cp.start_again()
            .map_err(|e| Stop::failed(format!("the API server did not come back: {e}")))?;
        steps.say(&format!(
            "the API server is back ({:.1} s to ready, same etcd data); waiting for {new_owner}'s ServiceL2Status",
            started.elapsed().as_secs_f64()
        ));
    }
    let status_nodes = wait_status_naming(k, client, &new_owner)?;
    steps.say(&format!(
        "ServiceL2Status now names {} (the API's account of who announces):",
        status_nodes.join(" and ")
    ));
    show(
        k,
        client,
        &format!("kubectl get servicel2statuses -n {METALLB_NS}"),
        &format!("/apis/metallb.io/v1beta1/namespaces/{METALLB_NS}/servicel2statuses"),
    );
    if status_nodes.iter().any(|n| n == owner) {
        Steps::block(&format!(
            "({owner}'s own object stays, as in a cluster, until its speaker Pod is deleted: \
             it is the Pod's, and no kubelet runs here)"
        ));
    }
    Ok(format!(
        " new_owner={new_owner} silent_ms={} takeover_ms={} unanswered={} v6_silent_ms={} \
         v6_takeover_ms={} l2status={}",
        ms(outage.silent),
        ms(outage.takeover),
        outage.unanswered,
        ms(outage6.silent),
        ms(outage6.takeover),
        status_nodes.join(",")
    ))
}

/// Waits until a ServiceL2Status names `node`; every node named then.
fn wait_status_naming(
    k: &mut KubeCluster,
    client: &kube::Client,
    node: &str,
) -> Result<Vec<String>, Stop> {
    wait_for(
        k,
        &format!("a ServiceL2Status naming {node}"),
        STATUS_LIMIT,
        |k| {
            let nodes = k.cp.block_on(objects::status_nodes(client))?;
            Ok(nodes.iter().any(|n| n == node).then_some(nodes))
        },
    )
}

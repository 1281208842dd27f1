//! Metrics as MetalLB v0.16.2 serves them, against MetalLB's own programs in one lab (a real
//! kube-apiserver, two speaker hosts): MetalLB's speaker on `node-a` and `vigil speaker` on
//! `node-b` side by side (one memberlist), MetalLB's controller and then `vigil controller`.
//!
//! - Every family MetalLB exposes in L2 mode is exposed by vigil with the same type and label
//!   names, except [`DIFFERENCES`] (each with its reason).
//! - Both refuse a scrape as MetalLB does: no token, a token lacking `get` on `/metrics`, a
//!   token the API server does not know (the same status codes from both).
//! - MetalLB's alerts from our chart (`deploy/helm/vigil`, prometheusrule.yaml) evaluated by
//!   Prometheus's `promtool test rules` on the series scraped from vigil: the pool at 3 of 4
//!   addresses raises no `MetalLBAddressPoolExhausted`; once vigil's controller gives a fourth
//!   Service the last address, it fires; the configuration alerts stay quiet.

use std::collections::{BTreeMap, BTreeSet};
use std::net::{IpAddr, SocketAddr};
use std::path::Path;
use std::time::Duration;

use vigil_kubelab::cluster::{
    Cluster, ClusterSpec, HttpAnswer, KEY_ACK_RBAC, LbService, SCRAPER_TOKEN, https_get, pool_yaml,
};
use vigil_kubelab::metallb::{self, ControllerConfig, MetalLbSpeaker};
use vigil_kubelab::{create_pod, deploy};

/// The pool: four addresses.
const POOL: [&str; 4] = [
    "198.18.0.200",
    "198.18.0.201",
    "198.18.0.202",
    "198.18.0.203",
];
/// MetalLB's metrics port, on every program.
const PORT: u16 = 9120;
/// The Services' namespace.
const APP: &str = "metrics";
/// Bound on every wait.
const LIMIT: Duration = Duration::from_secs(60);

/// MetalLB's families vigil does not expose, by name prefix, and why.
const DIFFERENCES: &[(&str, &str)] = &[
    (
        "go_",
        "the Go runtime's own figures (GC, goroutines, memstats): vigil is not a Go program",
    ),
    (
        "controller_runtime_",
        "controller-runtime's reconciler and webhook internals: vigil has no controller-runtime",
    ),
    (
        "workqueue_",
        "client-go's work queues: vigil's watches feed its cores directly",
    ),
    (
        "rest_client_",
        "client-go's HTTP client figures: vigil's client is kube-rs",
    ),
    ("certwatcher_", "controller-runtime's certificate watcher"),
    (
        "leader_election_master_status",
        "controller-runtime's leader election (off in MetalLB); vigil's is vigil_controller_replicated",
    ),
];

fn vigil() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_vigil"))
}

/// A family as a scrape shows it: its type and the label names of its series (`le` and
/// `quantile` left out).
type Families = BTreeMap<String, (String, BTreeSet<String>)>;

/// The families of a Prometheus text exposition.
fn families(text: &str) -> Families {
    let mut out = Families::new();
    let mut current = String::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').expect("TYPE name kind");
            current = name.to_string();
            out.insert(current.clone(), (kind.trim().to_string(), BTreeSet::new()));
            continue;
        }
        if line.starts_with('#') || line.trim().is_empty() {
            continue;
        }
        let (_, labels) = sample(line);
        if let Some((_, names)) = out.get_mut(&current) {
            names.extend(labels.into_keys().filter(|k| k != "le" && k != "quantile"));
        }
    }
    out
}

/// A sample line's name and labels (values unescaped).
fn sample(line: &str) -> (String, BTreeMap<String, String>) {
    let Some(open) = line.find('{') else {
        return (
            line.split(' ').next().unwrap_or_default().to_string(),
            BTreeMap::new(),
        );
    };
    let name = line[..open].to_string();
    let mut labels = BTreeMap::new();
    let mut chars = line[open + 1..].chars();
    loop {
        let key: String = chars.by_ref().take_while(|c| *c != '=').collect();
        let key = key.trim_start_matches(',').trim().to_string();
        if key.is_empty() || key.starts_with('}') {
            break;
        }
        assert_eq!(chars.next(), Some('"'), "{line}");
        let mut value = String::new();
        while let Some(c) = chars.next() {
            match c {
                '\\' => value.push(match chars.next() {
                    Some('n') => '\n',
                    Some(other) => other,
                    None => break,
                }),
                '"' => break,
                other => value.push(other),
            }
        }
        labels.insert(key, value);
    }
    (name, labels)
}

/// The series of `names` in a scrape: (labels rendered as PromQL, value).
fn series(text: &str, names: &[&str]) -> Vec<(String, f64)> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .filter_map(|l| {
            let (head, value) = l.rsplit_once(' ')?;
            let (name, labels) = sample(head);
            names.contains(&name.as_str()).then(|| {
                let mut all: Vec<String> = vec![format!("job=\"vigil\"")];
                all.extend(labels.iter().map(|(k, v)| format!("{k}={v:?}")));
                (
                    format!("{name}{{{}}}", all.join(",")),
                    value.parse().unwrap_or(f64::NAN),
                )
            })
        })
        .collect()
}

/// Every MetalLB family is vigil's too, typed and labelled alike, but for [`DIFFERENCES`];
/// returns the names compared.
fn compare(what: &str, metallb: &Families, vigil: &Families) -> Vec<String> {
    let mut compared = Vec::new();
    for (name, (kind, labels)) in metallb {
        if let Some((_, why)) = DIFFERENCES.iter().find(|(p, _)| name.starts_with(p)) {
            println!("{what}: {name} ({kind}) not compared: {why}");
            continue;
        }
        let ours = vigil
            .get(name)
            .unwrap_or_else(|| panic!("{what}: MetalLB's {name} ({kind}) is missing from vigil"));
        assert_eq!(&ours.0, kind, "{what}: the type of {name}");
        assert_eq!(&ours.1, labels, "{what}: the label names of {name}");
        compared.push(format!(
            "{name} ({kind}; {})",
            labels.iter().cloned().collect::<Vec<_>>().join(",")
        ));
    }
    println!(
        "{what}: compared {} families: {compared:#?}",
        compared.len()
    );
    compared
}

/// The status codes of `GET /metrics` at `addr` without a token, with a token lacking the
/// RBAC (MetalLB's speaker's), and with a token nobody issued.
fn refusals(ns: &str, addr: SocketAddr) -> [u16; 3] {
    let status = |token: Option<&str>| {
        https_get(ns, addr, "/metrics", token)
            .unwrap_or_else(|e| panic!("GET /metrics at {addr}: {e}"))
            .status
    };
    [
        status(None),
        status(Some("vigil-kubelab-metallb-speaker")),
        status(Some("no-such-token")),
    ]
}

/// Scrapes `addr` until `ready` holds on the text.
fn scrape_until(c: &Cluster, ns: &str, addr: SocketAddr, ready: impl Fn(&str) -> bool) -> String {
    let deadline = std::time::Instant::now() + LIMIT;
    loop {
        let answer: Option<HttpAnswer> = c.scrape(ns, addr, "/metrics").ok();
        if let Some(a) = answer.filter(|a| a.status == 200 && ready(&a.body)) {
            return a.body;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{addr}: no ready scrape in {LIMIT:?}"
        );
        std::thread::sleep(Duration::from_millis(300));
    }
}

/// `promtool test rules` of `tests` (YAML) against our chart's PrometheusRule.
fn promtool(promtool: &Path, dir: &Path, tests: &str) {
    let helm = deploy::helm_binary("k8s_metrics").expect("helm");
    let rendered = deploy::helm_template(
        &helm,
        &[
            "--set",
            "prometheusRule.enabled=true",
            "--show-only",
            "templates/prometheusrule.yaml",
        ],
    )
    .expect("helm template the PrometheusRule");
    let rule = deploy::documents_of_kinds(&rendered, &["PrometheusRule"]).expect("documents");
    let spec = &rule.first().expect("a PrometheusRule")["spec"];
    std::fs::write(
        dir.join("rules.yaml"),
        serde_json::to_string_pretty(spec).expect("json"),
    )
    .expect("rules file");
    std::fs::write(dir.join("tests.yaml"), tests).expect("tests file");
    let out = std::process::Command::new(promtool)
        .args(["test", "rules", "tests.yaml"])
        .current_dir(dir)
        .output()
        .expect("promtool");
    assert!(
        out.status.success(),
        "promtool test rules failed:\n{}\n{}\n{tests}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A promtool test: `series` held for ten minutes, `alerts` (name, expected alerts as YAML) at
/// 5 minutes.
fn rule_test(series: &[(String, f64)], alerts: &[(&str, String)]) -> String {
    let input: String = series
        .iter()
        .map(|(s, v)| format!("      - series: '{s}'\n        values: '{v}x20'\n"))
        .collect();
    let checks: String = alerts
        .iter()
        .map(|(name, exp)| {
            format!("      - eval_time: 5m\n        alertname: {name}\n        exp_alerts:{exp}\n")
        })
        .collect();
    format!(
        "rule_files: [rules.yaml]\nevaluation_interval: 30s\ntests:\n  - interval: 30s\n    input_series:\n{input}    alert_rule_test:\n{checks}"
    )
}

#[test]
fn metrics_families_refusals_and_alerts_as_metallb() {
    const TEST: &str = "metrics_families_refusals_and_alerts_as_metallb";
    let Some(bins) = metallb::metallb_binaries(TEST) else {
        return;
    };
    let Some(promtool_bin) = deploy::promtool_binary(TEST) else {
        return;
    };
    let Some(c) = Cluster::start(TEST, "metrics", &ClusterSpec::nodes(2)) else {
        return;
    };
    let nodes: Vec<String> = c.nodes().iter().map(ToString::to_string).collect();
    c.allow_scrapes();
    c.apply("vigil's key acknowledgement", KEY_ACK_RBAC);
    c.apply(
        "the pool",
        &pool_yaml(&[&format!("{}-{}", POOL[0], POOL[3])], &[]),
    );
    c.namespace(APP);
    // Three of the four addresses in use, chosen so each node announces one at least.
    let ips: Vec<IpAddr> = POOL.iter().map(|s| s.parse().unwrap()).collect();
    let mut taken: Vec<IpAddr> = Vec::new();
    for node in &nodes {
        if let Some(ip) = ips
            .iter()
            .find(|ip| c.first(**ip) == *node && !taken.contains(ip))
        {
            taken.push(*ip);
        }
    }
    for ip in &ips {
        if taken.len() < 3 && !taken.contains(ip) {
            taken.push(*ip);
        }
    }
    assert_eq!(
        taken.len(),
        3,
        "each node first for some address: {taken:?}"
    );
    for (i, ip) in taken.iter().enumerate() {
        let svc = LbService::new(APP, &format!("svc-{i}"))
            .ingress(&[*ip])
            .endpoints_on(&nodes, 10 + 10 * i as u8);
        c.add_service(&svc);
    }

    // MetalLB's speaker on node-a, vigil's on node-b, MetalLB's controller: all on 9120.
    let mut metallb_config = c.speakers[0].clone();
    metallb_config.extra_args.push(format!("--port={PORT}"));
    let mut metallb_speaker =
        MetalLbSpeaker::start(&c.lab, &bins, &metallb_config, &c.key).expect("MetalLB speaker");
    let mut vigil_speaker = c.vigil_speaker(vigil(), 1, &[format!("--port={PORT}")]);
    let controller_config = ControllerConfig {
        kubeconfig: Some(c.kubeconfigs.controller.clone()),
        extra_args: vec![format!("--port={PORT}")],
        ..ControllerConfig::default()
    };
    c.block_on(create_pod(c.client(), &controller_config.pod()))
        .expect("controller pod");
    let mut metallb_controller = metallb::start_controller(c.lab.cp(), &bins, &controller_config)
        .expect("MetalLB controller");

    // Every announced address asked for once, so the per-IP counters have series.
    let (a_ns, b_ns, cp_ns) = (
        c.ns(&c.speakers[0].host),
        c.ns(&c.speakers[1].host),
        c.lab.cp().ns().to_string(),
    );
    let a_addr = SocketAddr::new(c.speakers[0].ip, PORT);
    let b_addr = SocketAddr::new(c.speakers[1].ip, PORT);
    let cp_addr = SocketAddr::new(c.lab.cp().addr().ip(), PORT);
    let announced = |text: &str| text.contains("metallb_speaker_announced{");
    scrape_until(&c, &a_ns, a_addr, announced);
    scrape_until(&c, &b_ns, b_addr, announced);
    for ip in &taken {
        let IpAddr::V4(v4) = ip else { unreachable!() };
        assert!(
            !c.arp(*v4, Duration::from_secs(2)).is_empty(),
            "nobody answers for {ip}"
        );
    }
    let received = |text: &str| text.contains("metallb_layer2_requests_received{");
    let metallb_speaker_text = scrape_until(&c, &a_ns, a_addr, received);
    let vigil_speaker_text = scrape_until(&c, &b_ns, b_addr, received);
    let metallb_controller_text = scrape_until(&c, &cp_ns, cp_addr, |t| {
        t.contains("metallb_allocator_addresses_in_use_total{")
    });
    let mut all_compared = compare(
        "speaker",
        &families(&metallb_speaker_text),
        &families(&vigil_speaker_text),
    );

    // Refused alike: MetalLB's speaker against vigil's.
    let metallb_refusals = refusals(&a_ns, a_addr);
    println!("refusals (no token, no RBAC, unknown token): MetalLB's speaker {metallb_refusals:?}");
    assert_eq!(metallb_refusals[..2], [401, 403], "MetalLB's refusals");
    assert_eq!(
        refusals(&b_ns, b_addr),
        metallb_refusals,
        "vigil's speaker refuses as MetalLB's"
    );
    let status = c
        .scrape(&b_ns, b_addr, "/status")
        .expect("GET /status")
        .status;
    assert_eq!(status, 200, "vigil's /status with the scraper's token");
    let status = https_get(&b_ns, b_addr, "/status", None)
        .expect("GET /status")
        .status;
    assert_eq!(status, 401, "vigil's /status without a token");
    // `vigil status --https` reads it as an operator would, with the scraper's token.
    let token_file = c.dir("status").join("token");
    std::fs::write(&token_file, SCRAPER_TOKEN).expect("token file");
    let out = std::process::Command::new("ip")
        .args(["netns", "exec", &b_ns])
        .arg(vigil())
        .args(["status", "--https", "--addr", &b_addr.to_string()])
        .arg("--token-file")
        .arg(&token_file)
        .output()
        .expect("vigil status");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && text.contains(&c.speakers[1].node),
        "vigil status --https: {:?}\n{text}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );

    // vigil's controller takes over from MetalLB's.
    let metallb_controller_refusals = refusals(&cp_ns, cp_addr);
    metallb_controller.kill();
    let mut vigil_controller =
        c.vigil_controller(vigil(), "controller-0", &[format!("--port={PORT}")]);
    let in_use = |n: u32| {
        move |t: &str| {
            t.contains(&format!(
                "metallb_allocator_addresses_in_use_total{{pool=\"lab\"}} {n}"
            ))
        }
    };
    let vigil_controller_text = scrape_until(&c, &cp_ns, cp_addr, in_use(3));
    all_compared.extend(compare(
        "controller",
        &families(&metallb_controller_text),
        &families(&vigil_controller_text),
    ));
    assert_eq!(
        refusals(&cp_ns, cp_addr),
        metallb_controller_refusals,
        "vigil's controller refuses as MetalLB's"
    );

    // MetalLB's alerts on vigil's series: 3 of 4 in use, then the pool exhausted.
    let dir = c.dir("rules");
    let pool_families = [
        "metallb_allocator_addresses_in_use_total",
        "metallb_allocator_addresses_total",
    ];
    let client_families = [
        "metallb_k8s_client_config_loaded_bool",
        "metallb_k8s_client_config_stale_bool",
    ];
    let quiet = |t: &str| {
        let mut s = series(t, &pool_families);
        s.extend(series(t, &client_families));
        s.extend(
            series(&vigil_speaker_text, &client_families)
                .into_iter()
                .map(|(k, v)| (k.replace("job=\"vigil\"", "job=\"vigil-speaker\""), v)),
        );
        s
    };
    promtool(
        &promtool_bin,
        &dir,
        &rule_test(
            &quiet(&vigil_controller_text),
            &[
                ("MetalLBAddressPoolExhausted", " []".into()),
                ("MetalLBConfigNotLoaded", " []".into()),
                ("MetalLBStaleConfig", " []".into()),
            ],
        ),
    );
    c.add_service(&LbService::new(APP, "svc-3").endpoints_on(&nodes, 50));
    let exhausted_text = scrape_until(&c, &cp_ns, cp_addr, in_use(4));
    let exhausted = "
          - exp_labels:
              severity: critical
              job: vigil
              pool: lab
            exp_annotations:
              summary: 'Address pool lab is exhausted'
              description: 'vigil: every address of pool lab has been in use for more than a minute.'";
    promtool(
        &promtool_bin,
        &dir,
        &rule_test(
            &quiet(&exhausted_text),
            &[("MetalLBAddressPoolExhausted", exhausted.into())],
        ),
    );
    println!(
        "{TEST}: {} families compared, MetalLBAddressPoolExhausted fired on vigil's series",
        all_compared.len()
    );
    metallb_speaker
        .process_mut()
        .check_running()
        .expect("MetalLB speaker");
    vigil_speaker.check_running();
    vigil_controller.check_running();
}

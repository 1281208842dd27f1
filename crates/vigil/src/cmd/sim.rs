//! `vigil sim`: runs a named scenario on the gossip simulator and prints what it measured.

use super::parse_duration;
use clap::Parser;
use core::time::Duration;
use std::process::ExitCode;
use vigil_gossip::Profile;
use vigil_sim::{Link, Progress, Scenario, ScenarioKind};

/// The long help of `vigil sim`: what each scenario does and what the figures mean.
pub const LONG_ABOUT: &str = "Run a gossip scenario on the deterministic simulator.

Every node is a real `Membership` engine exchanging real memberlist wire bytes over a
simulated network, on a virtual clock: a run is a pure function of its flags and seed.

Scenarios:
  detect           crash one node at a time (the host vanishes); time until the first and
                   every live node declares it dead; restart it; repeat --trials times
  false-positives  a healthy cluster on lossy links (--loss) for --duration; count dead
                   verdicts about live nodes
  join             nodes join one by one through random earlier nodes; time to converge
  refute           a node freezes until someone suspects it, then thaws; it must refute
                   with a higher incarnation and never be declared dead (--trials times)
  leave            one node leaves cleanly, then another crashes
  partition        the cluster splits in two for --duration, then heals; if it does not
                   become whole by itself, the second half re-joins the first
  slow             like false-positives, with node 0 processing every input late
                   (--slow-delay)

Detection latency counts from the crash instant to each live node's Dead event: \"first\"
is one sample per crash (the first node to declare), \"all\" one sample per (crash, node).
A false positive is a Dead verdict about a node that was up, not frozen and not
partitioned from the declarer. Traffic is counted at the sender, lost datagrams included,
over the measured phase (after bootstrap and warm-up). Big clusters start fully meshed
(every node told about every other) instead of simulating the join, except in `join`.";

/// `vigil sim` flags (see [`LONG_ABOUT`]).
#[derive(Debug, Parser)]
pub struct Args {
    /// Scenario: detect, false-positives, join, refute, leave, partition, slow.
    #[arg(value_parser = parse_scenario)]
    pub scenario: ScenarioKind,

    /// Cluster size.
    #[arg(short, long, default_value_t = 5)]
    pub nodes: usize,

    /// Gossip profile: lan, wan, local (Go memberlist's defaults) or fast (vigil's).
    #[arg(short, long, default_value = "fast")]
    pub profile: Profile,

    /// Seed for everything; the same seed replays the same run.
    #[arg(short, long, default_value_t = 1)]
    pub seed: u64,

    /// Datagram loss on every link, as a fraction (0.05) or a percentage (5%).
    #[arg(long, default_value = "0", value_parser = parse_loss)]
    pub loss: f64,

    /// One-way link latency.
    #[arg(long, default_value = "100us", value_parser = parse_duration)]
    pub latency: Duration,

    /// Extra one-way delay, uniform in [0, jitter).
    #[arg(long, default_value = "100us", value_parser = parse_duration)]
    pub jitter: Duration,

    /// Crashes (detect) or freezes (refute) to run.
    #[arg(short, long, default_value_t = 10)]
    pub trials: usize,

    /// Measured virtual time for false-positives, slow and partition (e.g. 600s, 10m).
    #[arg(short, long, default_value = "60s", value_parser = parse_duration)]
    pub duration: Duration,

    /// Turn Lifeguard off (plain SWIM timing) to see what it is worth.
    #[arg(long)]
    pub no_lifeguard: bool,

    /// Crash only the process: the host answers with ICMP port unreachable and refuses TCP.
    #[arg(long)]
    pub process_crash: bool,

    /// Processing delay of the slow node in `slow` [default: two probe timeouts].
    #[arg(long, value_parser = parse_duration)]
    pub slow_delay: Option<Duration>,

    /// Hash the whole trace (every datagram, stream and event) and print the hash.
    #[arg(long)]
    pub trace: bool,

    /// Print every gossip event (node, time, event) to stderr: for small runs.
    #[arg(long)]
    pub log_events: bool,

    /// Print every datagram sent, decoded, to stderr: for small runs.
    #[arg(long)]
    pub log_packets: bool,

    /// No progress line.
    #[arg(short, long)]
    pub quiet: bool,
}

fn parse_scenario(s: &str) -> Result<ScenarioKind, String> {
    s.parse()
}

fn parse_loss(s: &str) -> Result<f64, String> {
    Link::parse_loss(s)
}

/// Runs `vigil sim`.
pub fn run(args: Args) -> ExitCode {
    if args.nodes < 2 {
        eprintln!("vigil sim: --nodes must be at least 2");
        return ExitCode::from(2);
    }
    if args.nodes > vigil_sim::net::MAX_NODES {
        eprintln!(
            "vigil sim: --nodes must be at most {}",
            vigil_sim::net::MAX_NODES
        );
        return ExitCode::from(2);
    }
    let mut scenario = Scenario::new(args.scenario, args.nodes, args.profile, args.seed);
    scenario.link = Link {
        loss: args.loss,
        latency: args.latency,
        jitter: args.jitter,
    };
    scenario.trials = args.trials;
    scenario.duration = args.duration;
    scenario.no_lifeguard = args.no_lifeguard;
    scenario.process_crash = args.process_crash;
    scenario.slow_delay = args.slow_delay.unwrap_or_default();
    scenario.trace = args.trace;
    scenario.log_events = args.log_events;
    scenario.log_packets = args.log_packets;

    let progress: Option<Box<dyn FnMut(Progress)>> = if args.quiet {
        None
    } else {
        Some(Box::new(Progress::stderr_printer()))
    };
    if !args.quiet {
        eprintln!(
            "[sim] {} with {} nodes, profile {}, seed {}",
            args.scenario, args.nodes, args.profile, args.seed
        );
    }
    let report = scenario.run(progress);
    if !args.quiet {
        eprintln!();
    }
    print!("{report}");
    if args.trace {
        println!("trace hash              {:016x}", report.trace_hash);
    }
    ExitCode::SUCCESS
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loss_takes_fractions_and_percentages() {
        assert_eq!(parse_loss("0.05"), Ok(0.05));
        assert_eq!(parse_loss("5%"), Ok(0.05));
        assert_eq!(parse_loss("0"), Ok(0.0));
        assert!(parse_loss("120%").is_err());
        assert!(parse_loss("lots").is_err());
    }

    #[test]
    fn the_command_line_parses() {
        use clap::CommandFactory;
        crate::Cli::command().debug_assert();
        let cli = crate::Cli::try_parse_from([
            "vigil", "sim", "detect", "-n", "100", "-p", "lan", "--loss", "1%",
        ])
        .unwrap();
        let crate::Command::Sim(a) = cli.command else {
            panic!("parsed as another subcommand");
        };
        assert_eq!(a.scenario, ScenarioKind::Detect);
        assert_eq!(a.nodes, 100);
        assert_eq!(a.profile, Profile::Lan);
        assert_eq!(a.loss, 0.01);
    }
}

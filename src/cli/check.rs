//! `txlab check`: run the anomaly-provoking workloads under protocols and hold each protocol to
//! the isolation level it promises.

use super::output::Output;
use super::run::Failure;
use super::CheckArgs;
use crate::checker::suite::{self, permitted, CheckConfig, CheckWorkload, WorkloadOutcome};
use crate::checker::AnomalyClass;
use crate::protocols::ProtocolKind;
use std::fmt::Write as _;

/// Transactions per thread in `--quick` mode.
pub const QUICK_TXNS: u64 = 2_000;
/// Transactions per thread by default.
pub const DEFAULT_TXNS: u64 = 20_000;
/// Transactions per thread in `--long` mode: with the default 8 threads, 1.2 M per workload (at
/// least 1 M committed even in `bank`, whose user aborts end about 8 % of them).
pub const LONG_TXNS: u64 = 150_000;

/// A protocol's result over all workloads.
#[derive(serde::Serialize)]
struct Verdict {
    protocol: ProtocolKind,
    promises: &'static str,
    held_to: &'static str,
    passed: bool,
    unpermitted: Vec<AnomalyClass>,
    workloads: Vec<WorkloadOutcome>,
}

/// Runs the check; `Ok(true)` when every protocol showed only anomalies it permits.
pub(super) fn check(args: &CheckArgs) -> Result<bool, Failure> {
    if args.threads == 0 || args.threads > 1024 {
        return Err(Failure::Usage(format!(
            "--threads {} is out of range (1 to 1024)",
            args.threads
        )));
    }
    if args.txns == Some(0) {
        return Err(Failure::Usage("--txns 0 is out of range (at least 1)".into()));
    }
    if args.max_pause_us > 1_000_000 {
        return Err(Failure::Usage(format!(
            "--max-pause-us {} is out of range (0 to 1000000)",
            args.max_pause_us
        )));
    }
    let txns = args.txns.unwrap_or(if args.quick {
        QUICK_TXNS
    } else if args.long {
        LONG_TXNS
    } else {
        DEFAULT_TXNS
    });
    let json = args.json.as_deref().map(|p| Output::create("--json", p)).transpose()?;
    let protocols =
        if args.protocol.is_empty() { ProtocolKind::ALL.to_vec() } else { args.protocol.clone() };
    let cfg = CheckConfig {
        threads: args.threads as usize,
        txns_per_thread: txns,
        seed: args.seed,
        max_pause_us: args.max_pause_us,
        options: super::protocol_options(&args.opt, &protocols).map_err(Failure::Usage)?,
    };
    let workloads =
        if args.workload.is_empty() { CheckWorkload::ALL.to_vec() } else { args.workload.clone() };
    println!(
        "txlab check: {} threads, {} transactions per thread per workload, seed {}, pauses up to {} us{}",
        cfg.threads,
        cfg.txns_per_thread,
        cfg.seed,
        cfg.max_pause_us,
        cfg.options.iter().map(|(n, v)| format!(", --opt {n}={v}")).collect::<String>()
    );
    let mut verdicts = Vec::new();
    let mut summary = Vec::new();
    for &p in &protocols {
        let isolation = args.isolation.unwrap_or(p.caps().isolation);
        let allowed = permitted(isolation);
        if isolation == p.caps().isolation {
            println!("\n{} (promises {})", p.name(), isolation.name());
        } else {
            println!(
                "\n{} (promises {}; held to {} by --isolation)",
                p.name(),
                p.caps().isolation.name(),
                isolation.name()
            );
        }
        let mut outcomes = Vec::new();
        let mut unpermitted: Vec<AnomalyClass> = Vec::new();
        for &w in &workloads {
            let out = crate::with_protocol!(p, P => suite::run::<P>(w, &cfg))
                .map_err(|e| Failure::Run(format!("{} on {}: {e}", p.name(), w.name())))?;
            let bad: Vec<AnomalyClass> =
                out.classes().into_iter().filter(|c| !allowed.contains(c)).collect();
            print!("{}", describe(&out, &bad, args.verbose));
            if !bad.is_empty() {
                println!(
                    "    replay: txlab check --protocol {} --workload {} --seed {} --txns {} --threads {} \
                     --max-pause-us {}{}",
                    p.name(),
                    w.name(),
                    cfg.seed,
                    cfg.txns_per_thread,
                    cfg.threads,
                    cfg.max_pause_us,
                    args.isolation.map(|i| format!(" --isolation {}", i.flag())).unwrap_or_default()
                        + &cfg.options.iter().map(|(n, v)| format!(" --opt {n}={v}")).collect::<String>()
                );
            }
            unpermitted.extend(bad);
            outcomes.push(out);
        }
        unpermitted.sort();
        unpermitted.dedup();
        let passed = unpermitted.is_empty();
        let seen: Vec<AnomalyClass> = {
            let mut v: Vec<_> = outcomes.iter().flat_map(|o| o.classes()).collect();
            v.sort();
            v.dedup();
            v
        };
        let observed = if seen.is_empty() {
            "no anomaly (serializable)".to_string()
        } else {
            seen.iter().map(|c| c.name()).collect::<Vec<_>>().join(", ")
        };
        let hidden = outcomes.iter().any(|o| {
            o.report.anomalies.iter().any(|a| allowed.contains(&a.class))
                || o.violations.iter().any(|(c, _)| allowed.contains(c))
        });
        if hidden && !args.verbose {
            println!(
                "  (anomalies {} permits are not detailed; --verbose shows them)",
                isolation.name()
            );
        }
        summary.push(format!(
            "  {:<13} {}  {}: observed {observed}; {} permits {}",
            p.name(),
            if passed { "PASS" } else { "FAIL" },
            if isolation == p.caps().isolation {
                format!("promises {}", isolation.name())
            } else {
                format!("held to {}", isolation.name())
            },
            isolation.name(),
            if allowed.is_empty() {
                "none".to_string()
            } else if allowed.len() == AnomalyClass::ALL.len() {
                "every anomaly".to_string()
            } else {
                allowed.iter().map(|c| c.name()).collect::<Vec<_>>().join(", ")
            }
        ));
        verdicts.push(Verdict {
            protocol: p,
            promises: p.caps().isolation.name(),
            held_to: isolation.name(),
            passed,
            unpermitted,
            workloads: outcomes,
        });
    }
    println!("\nVerdicts:");
    for line in &summary {
        println!("{line}");
    }
    let failed: Vec<&str> =
        verdicts.iter().filter(|v| !v.passed).map(|v| v.protocol.name()).collect();
    if failed.is_empty() {
        println!(
            "overall: PASS ({} protocol(s) x {} workload(s): every protocol showed only anomalies \
             it permits)",
            protocols.len(),
            workloads.len()
        );
    } else {
        println!(
            "overall: FAIL ({} showed anomalies {} not permit)",
            failed.join(", "),
            if failed.len() == 1 { "it does" } else { "they do" }
        );
    }
    if let Some(mut out) = json {
        let v = serde_json::json!({
            "config": cfg,
            "verdicts": verdicts,
            "passed": verdicts.iter().all(|v| v.passed),
        });
        let text = serde_json::to_string_pretty(&v).expect("plain data serializes");
        out.write_all_bytes(text.as_bytes())?;
        out.finish()?;
    }
    Ok(verdicts.iter().all(|v| v.passed))
}

/// One workload's line, then the details of its anomalies: those the protocol is not permitted
/// always, the permitted ones only when `verbose`.
fn describe(out: &WorkloadOutcome, bad: &[AnomalyClass], verbose: bool) -> String {
    let mut s = String::new();
    let classes = out.classes();
    let _ = writeln!(
        s,
        "  {:<12} {:>8} committed {:>8} aborted {:>7.1} s   {}",
        out.workload.name(),
        out.committed,
        out.aborted,
        out.seconds,
        if classes.is_empty() {
            "no anomaly, invariant holds".to_string()
        } else {
            classes.iter().map(|c| c.name()).collect::<Vec<_>>().join(", ")
        }
    );
    for a in out.report.anomalies.iter().filter(|a| verbose || bad.contains(&a.class)) {
        let mark = if bad.contains(&a.class) { "not permitted" } else { "permitted" };
        let _ = writeln!(s, "    {} ({mark}): {} found; e.g. {}", a.class, a.count, a.example);
        if !a.cycle.is_empty() {
            let _ = writeln!(s, "      cycle: {}", crate::checker::cycle_text(&a.cycle));
        }
    }
    let shown: Vec<_> = out.violations.iter().filter(|(c, _)| verbose || bad.contains(c)).collect();
    for (class, what) in shown.iter().take(3) {
        let mark = if bad.contains(class) { "not permitted" } else { "permitted" };
        let _ = writeln!(s, "    invariant broken, {class} ({mark}): {what}");
    }
    if shown.len() > 3 {
        let _ = writeln!(s, "    ... {} invariant violations in all", shown.len());
    }
    s
}

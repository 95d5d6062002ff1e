//! `txlab recover`: rebuilds a database from a run's log directory, reports what it recovered
//! and, with `--verify`, checks the workload's invariants on the result.

use super::run::{usage, Failure, FromSpec, Plan, Spec, RUN_MANIFEST};
use super::RecoverArgs;
use crate::durability::recovery::{recover, RecoveryReport};
use crate::engine::{Database, Protocol, ProtocolOptions};
use crate::error::Error;
use crate::protocols::ProtocolKind;
use crate::workloads::smallbank::SmallBank;
use crate::workloads::tpcc::Tpcc;
use crate::workloads::ycsb::Ycsb;
use std::path::Path;

/// What `--verify` found.
#[derive(Debug, serde::Serialize)]
struct Verdict {
    /// Whether the invariants hold (`None`: the workload has none that a crash leaves
    /// checkable).
    holds: Option<bool>,
    message: String,
}

pub(super) fn run(args: &RecoverArgs) -> Result<i32, Failure> {
    let dir = &args.log_dir;
    let path = dir.join(RUN_MANIFEST);
    let text = std::fs::read(&path).map_err(|e| {
        Failure::Run(format!("{}: {e} (not the log directory of a txlab run?)", path.display()))
    })?;
    let manifest: serde_json::Value = serde_json::from_slice(&text)
        .map_err(|e| Failure::Run(format!("{}: unreadable: {e}", path.display())))?;
    let name = manifest["protocol"].as_str().unwrap_or_default();
    let kind =
        ProtocolKind::ALL.iter().copied().find(|k| k.name() == name).ok_or_else(|| {
            Failure::Run(format!("{}: unknown protocol '{name}'", path.display()))
        })?;
    let tokens: Vec<String> = manifest["command"]
        .as_array()
        .map(|a| a.iter().filter_map(|t| t.as_str().map(String::from)).collect())
        .unwrap_or_default();
    let (mut run_args, _) = super::parse_run(&tokens)
        .map_err(|e| Failure::Run(format!("{}: the recorded command: {e}", path.display())))?;
    // The recorded run logged; rebuilding its workload must not start a log.
    run_args.log_dir = None;
    run_args.checkpoint_interval = 0.0;
    run_args.group_commit_ms = 10;
    run_args.protocol = vec![kind];
    let plan = Plan::new(&run_args).map_err(|f| match f {
        Failure::Usage(m) => Failure::Run(format!("{}: the recorded command: {m}", path.display())),
        f => f,
    })?;
    let json = args.json.as_deref().map(|p| super::run::create_output("--json", p)).transpose()?;
    let outcome = crate::with_protocol!(kind, P => match &plan.spec {
        Spec::Ycsb(_) => recover_as::<P, Ycsb>(&plan, dir, args.verify),
        Spec::SmallBank(_) => recover_as::<P, SmallBank>(&plan, dir, args.verify),
        Spec::Tpcc(_) => recover_as::<P, Tpcc>(&plan, dir, args.verify),
    });
    let (report, verdict) = outcome.map_err(|e| match e {
        Error::Config(m) => usage(m),
        e => Failure::Run(e.to_string()),
    })?;
    for t in &report.torn {
        eprintln!("warning: {t}");
    }
    println!(
        "recovered {} ({}): {} transactions up to log epoch {} ({} beyond it not acknowledged, \
         dropped), {} rows ({} from the checkpoint), {} keys deleted; {:.1} MB of log and \
         checkpoint in {} files, {:.3} s, {:.2} GB/s",
        dir.display(),
        kind.name(),
        report.transactions,
        report.durable_epoch,
        report.beyond_durable,
        report.rows,
        report.checkpoint_rows,
        report.deleted,
        report.bytes as f64 / 1e6,
        report.segments,
        report.seconds,
        report.gb_per_s()
    );
    if let Some(v) = &verdict {
        println!("verify: {}", v.message);
    }
    if let Some(mut f) = json {
        use std::io::Write as _;
        let value = serde_json::json!({ "recovery": &report, "verify": &verdict });
        writeln!(f, "{}", serde_json::to_string_pretty(&value).expect("serializable"))
            .map_err(|e| Failure::Run(format!("--json: {e}")))?;
    }
    Ok(if verdict.is_some_and(|v| v.holds == Some(false)) { super::EXIT_FAILURE } else { 0 })
}

fn recover_as<P: Protocol, W: FromSpec>(
    plan: &Plan,
    dir: &Path,
    verify: bool,
) -> Result<(RecoveryReport, Option<Verdict>), Error> {
    let workload = W::from_spec(&plan.spec, plan.cores)
        .ok_or_else(|| Error::Config("the recorded workload changed".into()))?;
    let db = Database::<P>::builder(&workload.tables())
        .protocol_options(P::Options::from_pairs(&plan.opts).map_err(Error::Config)?)
        .txn_types(workload.txn_types())
        .build()?;
    let report = recover(&db, dir)?;
    let verdict = verify.then(|| match workload.name() {
        // The money total is the initial balances plus the deposits that committed, which the
        // run kept in memory: a crash loses it.
        "smallbank" => Verdict {
            holds: None,
            message: "SmallBank's money total depends on the deposits the run committed, \
                      which it kept in memory: not checkable after a crash"
                .into(),
        },
        _ => match workload.check(&db) {
            Ok(()) => Verdict { holds: Some(true), message: "invariants hold".into() },
            Err(m) => Verdict { holds: Some(false), message: m },
        },
    });
    Ok((report, verdict))
}

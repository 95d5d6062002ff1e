//! `txlab recover`: rebuilds a database from a run's log directory, reports what it recovered
//! and, with `--verify`, checks the workload's invariants on the result.

use super::output::Output;
use super::run::{usage, Failure, FromSpec, Plan, Spec, RUN_MANIFEST};
use super::RecoverArgs;
use crate::durability::recovery::{recover, RecoveryReport};
use crate::engine::{Database, Protocol, ProtocolOptions};
use crate::error::Error;
use crate::protocols::ProtocolKind;
use crate::workloads::pieces::Pieces;
use crate::workloads::smallbank::SmallBank;
use crate::workloads::tpcc::Tpcc;
use crate::workloads::tpce::Tpce;
use crate::workloads::ycsb::Ycsb;
use std::path::Path;

/// What `--verify` found.
#[derive(Debug, serde::Serialize)]
struct Verdict {
    /// Whether the invariants hold (`None`: the workload has none that a crash leaves
    /// checkable).
    holds: Option<bool>,
    message: String,
    /// The acknowledgement check (`run --ack-file`), when the run had one.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    acks: Vec<String>,
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
    run_args.log = Vec::new();
    run_args.sync = None;
    run_args.checkpoint_interval = 0.0;
    run_args.group_commit_ms = 10;
    run_args.log_buffer_kb = 16384;
    run_args.protocol = vec![kind];
    let acks = run_args.ack_file.take();
    run_args.crash_at = None;
    let plan = Plan::new(&run_args).map_err(|f| match f {
        Failure::Usage(m) => Failure::Run(format!("{}: the recorded command: {m}", path.display())),
        f => f,
    })?;
    let json = args.json.as_deref().map(|p| Output::create("--json", p)).transpose()?;
    let outcome = crate::with_protocol!(kind, P => match &plan.spec {
        Spec::Ycsb(_) => recover_as::<P, Ycsb>(&plan, dir, args.verify, acks.as_deref()),
        Spec::SmallBank(_) => recover_as::<P, SmallBank>(&plan, dir, args.verify, acks.as_deref()),
        Spec::Tpcc(_) => recover_as::<P, Tpcc>(&plan, dir, args.verify, acks.as_deref()),
        Spec::Tpce(_) => recover_as::<P, Tpce>(&plan, dir, args.verify, acks.as_deref()),
        Spec::Pieces(_) => recover_as::<P, Pieces>(&plan, dir, args.verify, acks.as_deref()),
        Spec::Declared(_) => recover_as::<P, crate::workloads::spec::SpecWorkload>(
            &plan,
            dir,
            args.verify,
            acks.as_deref(),
        ),
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
        for line in &v.acks {
            println!("verify: {line}");
        }
        println!("verify: {}", v.message);
    }
    if let Some(mut f) = json {
        let value = serde_json::json!({ "recovery": &report, "verify": &verdict });
        let text = serde_json::to_string_pretty(&value).expect("serializable") + "\n";
        f.write_all_bytes(text.as_bytes())?;
        f.finish()?;
    }
    let failed = verdict
        .is_some_and(|v| v.holds == Some(false) || v.acks.iter().any(|l| l.starts_with("MISSING")));
    Ok(if failed { super::EXIT_FAILURE } else { 0 })
}

fn recover_as<P: Protocol, W: FromSpec>(
    plan: &Plan,
    dir: &Path,
    verify: bool,
    acks: Option<&Path>,
) -> Result<(RecoveryReport, Option<Verdict>), Error> {
    let mut workload = W::from_spec(&plan.spec, plan.cores)
        .ok_or_else(|| Error::Config("the recorded workload changed".into()))?;
    let mut tables = workload.tables();
    if acks.is_some() {
        tables.push(super::run::ack_table());
    }
    let db = Database::<P>::builder(&tables)
        .protocol_options(
            P::Options::from_pairs(&crate::engine::options::pairs_for(&plan.opts, P::NAME))
                .map_err(Error::Config)?,
        )
        .txn_types(workload.txn_types())
        .build()?;
    let report = recover(&db, dir)?;
    let ack_table = crate::storage::TableId(tables.len() as u32 - 1);
    if acks.is_some() {
        // Each transaction wrote its worker's ledger beside its own writes: the recovered
        // ledgers are those of exactly the recovered transactions.
        let mut total = 0i64;
        let last = crate::engine::driver::ACK_WORKERS - 1;
        db.visit_present(ack_table, 0, last, usize::MAX, |_, row| {
            total += crate::engine::driver::read_ack(row).1;
            std::ops::ControlFlow::Continue(())
        })
        .ok_or_else(|| Error::Config("the acknowledgement table cannot be read".into()))?;
        workload.adopt_ledger(total);
    }
    let mut verdict = verify.then(|| match workload.name() {
        // The invariant compares with what the run committed (SmallBank's deposits, the pieces'
        // commits, a spec's updates), which a run without acknowledgements kept in memory
        // only: a crash loses it.
        name if workload.ledgered() && acks.is_none() => Verdict {
            holds: None,
            message: format!(
                "{name}'s invariant depends on what the run committed, which it kept in memory: \
                 not checkable after a crash without --ack-file"
            ),
            acks: Vec::new(),
        },
        name => match (workload.invariants(), workload.check(&db)) {
            (None, _) => Verdict {
                holds: None,
                message: format!(
                    "{name} has no invariant to check{}",
                    if acks.is_some() {
                        ""
                    } else {
                        "; run with --ack-file FILE to check that no acknowledged commit was lost"
                    }
                ),
                acks: Vec::new(),
            },
            (Some(what), Ok(())) => Verdict {
                holds: Some(true),
                message: format!("invariants hold: {what}"),
                acks: Vec::new(),
            },
            (Some(_), Err(m)) => Verdict { holds: Some(false), message: m, acks: Vec::new() },
        },
    });
    if let (Some(v), Some(path)) = (&mut verdict, acks) {
        v.acks = check_acks(&db, ack_table, path)?;
    }
    Ok((report, verdict))
}

/// Compares the durable acknowledgements a run wrote to `path` with the recovered counts: one
/// line per worker, starting `MISSING` where an acknowledged commit was not recovered.
fn check_acks<P: Protocol>(
    db: &Database<P>,
    table: crate::storage::TableId,
    path: &Path,
) -> Result<Vec<String>, Error> {
    use crate::engine::Recon;
    let text = std::fs::read_to_string(path)
        .map_err(|e| Error::Durability(format!("{}: {e}", path.display())))?;
    let mut acked: std::collections::BTreeMap<u64, u64> = Default::default();
    for line in text.lines() {
        // A line cut by the kill is not an acknowledgement the run finished making.
        let mut it = line.split(' ');
        if let (Some(w), Some(n), None) = (it.next(), it.next(), it.next()) {
            if let (Ok(w), Ok(n)) = (w.parse::<u64>(), n.parse::<u64>()) {
                let e = acked.entry(w).or_default();
                *e = (*e).max(n);
            }
        }
    }
    let mut out = Vec::new();
    let mut total = 0;
    for (&w, &n) in &acked {
        let got = db.peek(table, w, |row| crate::engine::driver::read_ack(row).0).unwrap_or(0);
        total += n;
        if got < n {
            out.push(format!(
                "MISSING: worker {w} had {n} commits acknowledged durable, {got} were recovered"
            ));
        }
    }
    if out.is_empty() {
        out.push(format!(
            "all {total} commits acknowledged durable by {} workers were recovered",
            acked.len()
        ));
    }
    Ok(out)
}

//! `txlab analyze`: the static conflict analysis of a workload's transaction templates
//! ([`crate::engine::scgraph`]), in words or as a Graphviz graph.

use super::output::Output;
use super::run::Failure;
use crate::engine::scgraph::{Analysis, Deferral, Granularity};
use crate::engine::Workload;
use crate::workloads::pieces::{Pieces, PiecesConfig};
use crate::workloads::smallbank::{SmallBank, SmallBankConfig};
use crate::workloads::tpcc::{AnalyticConfig, Tpcc, TpccConfig};
use crate::workloads::ycsb::{Ycsb, YcsbConfig};
use crate::workloads::WorkloadKind;
use std::path::PathBuf;

#[derive(clap::Args, Debug)]
pub(super) struct AnalyzeArgs {
    /// Workload whose transaction templates are analysed: ycsb, smallbank, tpcc, tpce, pieces,
    /// or spec:FILE.toml
    #[arg(long, short = 'w', default_value = "tpcc", value_parser = super::WorkloadArg::parse)]
    workload: super::WorkloadArg,
    /// TPC-C: include the analytic transaction type (see `txlab run --analytic`)
    #[arg(long)]
    analytic: bool,
    /// What two accesses must share to conflict: a table (what the ic3 protocol runs with,
    /// since it tracks conflicts per record) or a column (the IC3 paper's analysis)
    #[arg(long, value_enum, default_value = "table")]
    granularity: Granularity,
    /// Which commutative accumulations are deferred to commit and left out of the C-edges
    /// (IC3 §4.3; the ic3 protocol's `--opt commutative`): those into columns nothing else
    /// reads or writes (on), into tables nothing else writes (rows: what ic3 does with
    /// snapshots), or none (off)
    #[arg(long, value_enum, value_name = "on|rows|off", default_value = "on")]
    commutative: Deferral,
    /// Online analysis (IC3 §4.5): the mix runs these types first (comma-separated names),
    /// then all of them: print how the running transactions move from the first graph to the
    /// second (side by side, or on the transitional graph)
    #[arg(long, value_name = "TYPE,...", value_delimiter = ',')]
    from: Option<Vec<String>>,
    /// Also write the SC-graph in Graphviz's DOT language to this file (`dot -Tsvg`)
    #[arg(long, value_name = "FILE.dot")]
    dot: Option<PathBuf>,
}

/// Prints the analysis of the chosen workload's templates, and writes its graph if asked.
pub(super) fn analyze(args: &AnalyzeArgs) -> Result<(), Failure> {
    if args.analytic && args.workload.kind != WorkloadKind::Tpcc {
        return Err(Failure::Usage("--analytic is a TPC-C flag (add -w tpcc)".into()));
    }
    let out = args.dot.as_deref().map(|p| Output::create("--dot", p)).transpose()?;
    let (types, tables) = match args.workload.kind {
        WorkloadKind::Tpcc => {
            let mut cfg = TpccConfig::new(1);
            if args.analytic {
                cfg.analytic =
                    Some(AnalyticConfig { share: 10, scan: AnalyticConfig::DEFAULT_SCAN });
            }
            let w = Tpcc::new(cfg);
            (w.txn_types().to_vec(), w.tables())
        }
        WorkloadKind::Tpce => {
            let w =
                crate::workloads::tpce::Tpce::new(crate::workloads::tpce::TpceConfig::new(1_000));
            (w.txn_types().to_vec(), w.tables())
        }
        WorkloadKind::Smallbank => {
            let w = SmallBank::new(SmallBankConfig { customers: 100, spin_us: 0 });
            (w.txn_types().to_vec(), w.tables())
        }
        WorkloadKind::Pieces => {
            let w = Pieces::new(PiecesConfig { rows: 4, scope: 1, ..PiecesConfig::default() });
            (w.txn_types().to_vec(), w.tables())
        }
        WorkloadKind::Ycsb => {
            let w = Ycsb::new(YcsbConfig::default(), 1);
            (w.txn_types().to_vec(), w.tables())
        }
        WorkloadKind::Spec => {
            let file = args.workload.spec.as_ref().expect("spec:FILE carries its spec");
            let tables = crate::workloads::spec::SpecWorkload::tables_for(&file.1);
            (file.1.templates().to_vec(), tables)
        }
    };
    let workload = args.workload.name();
    let names: Vec<String> = tables.into_iter().map(|t| t.name).collect();
    let analysis = Analysis::with_options(&types, args.granularity, args.commutative)
        .with_table_names(names.clone());
    if let Some(from) = &args.from {
        let mut subset = Vec::new();
        for name in from {
            let Some(i) = types.iter().position(|t| t.name == name) else {
                let known: Vec<&str> = types.iter().map(|t| t.name).collect();
                return Err(Failure::Usage(format!(
                    "--from: workload {} has no transaction type '{name}' (it has: {})",
                    workload,
                    known.join(", ")
                )));
            };
            subset.push(i);
        }
        let first = Analysis::of_types(&types, &subset, args.granularity, args.commutative)
            .with_table_names(names);
        let (w, from) = (&workload, from.join(", "));
        print!("workload {w} with {from} only: {}", first.text(&types));
        print!("\nfrom {from} to every type: {}\n", first.transition(&analysis).text(&types));
    }
    print!("workload {workload}: {}", analysis.text(&types));
    if let Some(mut f) = out {
        f.write_all_bytes(analysis.dot(&types).as_bytes())?;
        let path = f.path().display().to_string();
        f.finish()?;
        println!("\nSC-graph written to {path} (render with: dot -Tsvg)");
    }
    Ok(())
}

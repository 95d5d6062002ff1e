//! A loaded database and workload, for whichever protocol and workload the command names
//! ([`Session`] hides the pair behind one `dyn` call per run, not per transaction): loading,
//! the measured runs, checkpoints while they run, and `--crash-at`.

use super::*;

/// A loaded database and the workload instance that runs on it.
pub(super) trait Session {
    /// Measures one run as `plan` says.
    fn measure(&mut self, plan: &Plan) -> Result<RunReport, Error>;

    /// Whether every table has room left for half as much again as the last run added to it
    /// (a table that fills up stops a run with `table-full`; a sweep's runs add up on a reused
    /// database).
    fn room_for_another(&self) -> bool;

    /// Whether the last run added rows to any table.
    fn grew(&self) -> bool;
}

/// A workload built from its validated configuration.
pub(in crate::cli) trait FromSpec: Workload + Sized + 'static {
    fn from_spec(spec: &Spec, cores: usize) -> Option<Self>;
}

impl FromSpec for Ycsb {
    fn from_spec(spec: &Spec, cores: usize) -> Option<Self> {
        // ζ(records, θ) is cached, so this costs nothing after the first time.
        match spec {
            Spec::Ycsb(c) => Some(Ycsb::new(c.clone(), cores)),
            _ => None,
        }
    }
}

impl FromSpec for SmallBank {
    fn from_spec(spec: &Spec, _cores: usize) -> Option<Self> {
        match spec {
            Spec::SmallBank(c) => Some(SmallBank::new(c.clone())),
            _ => None,
        }
    }
}

impl FromSpec for Pieces {
    fn from_spec(spec: &Spec, _cores: usize) -> Option<Self> {
        match spec {
            Spec::Pieces(c) => Some(Pieces::new(c.clone())),
            _ => None,
        }
    }
}

impl FromSpec for Tpce {
    fn from_spec(spec: &Spec, _cores: usize) -> Option<Self> {
        match spec {
            Spec::Tpce(c) => Some(Tpce::new(c.clone())),
            _ => None,
        }
    }
}

impl FromSpec for crate::workloads::spec::SpecWorkload {
    fn from_spec(spec: &Spec, cores: usize) -> Option<Self> {
        match spec {
            // The plan built one already, so the spec is valid.
            Spec::Declared(f) => crate::workloads::spec::SpecWorkload::new(f.1.clone(), cores).ok(),
            _ => None,
        }
    }
}

impl FromSpec for Tpcc {
    fn from_spec(spec: &Spec, _cores: usize) -> Option<Self> {
        match spec {
            Spec::Tpcc(c) => Some(Tpcc::new(c.clone())),
            _ => None,
        }
    }
}

pub(super) fn load(plan: &Plan, kind: ProtocolKind) -> Result<Box<dyn Session>, Error> {
    crate::with_protocol!(kind, P => match &plan.spec {
        Spec::Ycsb(_) => load_as::<P, Ycsb>(plan),
        Spec::SmallBank(_) => load_as::<P, SmallBank>(plan),
        Spec::Tpcc(_) => load_as::<P, Tpcc>(plan),
        Spec::Tpce(_) => load_as::<P, Tpce>(plan),
        Spec::Pieces(_) => load_as::<P, Pieces>(plan),
        Spec::Declared(_) => load_as::<P, crate::workloads::spec::SpecWorkload>(plan),
    })
}

/// Creates and loads a database for protocol `P` with workload `W`.
pub(super) fn load_as<P: Protocol + 'static, W: FromSpec>(
    plan: &Plan,
) -> Result<Box<dyn Session>, Error> {
    use crate::engine::ProtocolOptions;
    let workload = W::from_spec(&plan.spec, plan.cores)
        .ok_or_else(|| Error::Config("the plan's workload changed under its database".into()))?;
    let mut opts = plan.db_opts.clone();
    if let Some(log) = &mut opts.log {
        log.dir = log.dir.join(P::NAME);
    }
    let opts_for = crate::engine::options::pairs_for(&plan.opts, P::NAME);
    let mut tables = workload.tables();
    if plan.run_cfg.acks.is_some() {
        tables.push(ack_table());
    }
    let db = Database::<P>::builder(&tables)
        .options(opts)
        .protocol_options(P::Options::from_pairs(&opts_for).map_err(Error::Config)?)
        .txn_types(workload.txn_types())
        .build()?;
    workload.load(&db, plan.cores)?;
    if let Some(log) = db.log() {
        // What `txlab recover` needs to rebuild the schema and check the workload, then the
        // loaded rows, which are not logged.
        let manifest = serde_json::json!({
            "format": 1,
            "protocol": P::NAME,
            "options": &opts_for,
            "command": &plan.argv,
        });
        let path = log.options().dir.join(RUN_MANIFEST);
        std::fs::write(&path, serde_json::to_vec_pretty(&manifest).expect("serializable"))
            .map_err(|e| Error::Durability(format!("{}: {e}", path.display())))?;
        db.checkpoint()?;
    }
    Ok(Box::new(Loaded { db, workload, grown: Vec::new() }))
}

pub(super) struct Loaded<P: Protocol, W: Workload> {
    db: Database<P>,
    workload: W,
    /// Rows each table added during the last run (empty before the first).
    grown: Vec<u64>,
}

impl<P: Protocol, W: Workload> Loaded<P, W> {
    /// Rows each table has handed out.
    pub(super) fn allocated(&self) -> Vec<u64> {
        self.db.storage().tables().iter().map(|t| t.rows.allocated()).collect()
    }
}

impl<P: Protocol, W: FromSpec> Session for Loaded<P, W> {
    fn measure(&mut self, plan: &Plan) -> Result<RunReport, Error> {
        // The plan's workload (its θ, mix, ...) continues on the data the last one left.
        let mut next = W::from_spec(&plan.spec, plan.cores)
            .ok_or_else(|| Error::Config("a database was reused for another workload".into()))?;
        next.continue_from(&self.workload);
        self.workload = next;
        let (db, workload, cfg) = (&self.db, &self.workload, &plan.run_cfg);
        let names: Vec<&'static str> = workload.txn_types().iter().map(|t| t.name).collect();
        let log_before = db.log().map(|l| l.stats());
        let before = self.allocated();
        let t_run = Instant::now();
        let (per_worker, checkpoints) = drive_checkpointing(db, workload, cfg, plan)?;
        let run_s = t_run.elapsed().as_secs_f64();
        self.grown = self.allocated().iter().zip(&before).map(|(a, b)| a - b).collect();
        // A serializable protocol must keep the workload's invariant; others are only reported.
        let broken = workload.check(db).err();
        if let (Some(m), Isolation::Serializable) = (&broken, P::CAPS.isolation) {
            return Err(Error::Invariant(format!("{} on {}: {m}", P::NAME, workload.name())));
        }
        let mut total = WorkerStats::new(names.len());
        for s in &per_worker {
            total.merge(s);
        }
        // Rates over the window the workers timed (about the planned duration).
        let seconds = total.window_seconds(match cfg.length {
            RunLength::Timed { duration, .. } => duration.as_secs_f64(),
            RunLength::Transactions { .. } => f64::MIN_POSITIVE,
        });
        let mut config = plan.config.clone();
        config["workload"] = workload.config();
        // The policy this protocol ran with, not `protocol`.
        config["run"]["backoff"] =
            serde_json::to_value(cfg.backoff.of::<P>()).expect("serializable");
        let mut report =
            RunReport::new(P::NAME, workload.name(), &names, &total, cfg.threads, seconds, config);
        report.options = serde_json::to_value(db.protocol().options()).expect("serializable");
        report.invariant_violation = broken;
        if let (Some(log), Some(before), Some(lo)) = (db.log(), log_before, &plan.db_opts.log) {
            let after = log.stats();
            report.set_durability(
                DurabilityReport {
                    log: lo.kind.name().into(),
                    sync: lo.sync.name().into(),
                    group_commit_s: lo.group_interval.as_secs_f64(),
                    checkpoint_interval_s: plan.checkpoint_interval.as_secs_f64(),
                    durable_commits: 0,
                    not_durable: 0,
                    durable_latency: Default::default(),
                    log_mb_per_s: (after.bytes - before.bytes) as f64 / run_s / 1e6,
                    syncs_per_s: (after.syncs - before.syncs) as f64 / run_s,
                    groups_per_s: (after.groups - before.groups) as f64 / run_s,
                    checkpoints,
                },
                &total,
            );
        }
        report.versions = db.protocol().versions(db);
        if cfg.breakdown {
            report.breakdown = crate::engine::report::Breakdown::of(&total);
        }
        report.set_headline(workload.headline(), &total, seconds);
        report.notes = workload.notes();
        let missing = total.aborts[AbortReason::MissingRow as usize];
        if missing > 0 && P::CAPS.isolation == Isolation::Serializable {
            return Err(Error::Invariant(format!(
                "{} on {}: {missing} transactions found a row missing that the database's \
                 invariants guarantee",
                P::NAME,
                workload.name()
            )));
        }
        if plan.db_opts.record_history {
            let history = db.take_history();
            let checked = crate::checker::check(&history);
            let allowed = crate::checker::suite::permitted(P::CAPS.isolation);
            report.history_check = Some(HistoryCheck {
                txns: checked.txns,
                committed: checked.committed,
                permitted: checked.anomalies.iter().all(|a| allowed.contains(&a.class)),
                anomalies: checked.anomalies,
            });
        }
        Ok(report)
    }

    fn room_for_another(&self) -> bool {
        let tables = self.db.storage().tables();
        tables.iter().zip(&self.grown).all(|(t, &g)| {
            t.rows.capacity().saturating_sub(t.rows.allocated()) >= g.saturating_add(g / 2)
        })
    }

    fn grew(&self) -> bool {
        self.grown.iter().any(|&g| g > 0)
    }
}

/// Runs the workload; with logging and `--checkpoint-interval`, a checkpointer thread writes
/// checkpoints meanwhile. Returns the workers' statistics and the checkpoints written.
pub(super) fn drive_checkpointing<P: Protocol, W: Workload>(
    db: &Database<P>,
    workload: &W,
    cfg: &RunConfig,
    plan: &Plan,
) -> Result<(Vec<WorkerStats>, u64), Error> {
    let every = plan.checkpoint_interval;
    if db.log().is_none() || (every.is_zero() && plan.crash.is_none()) {
        return Ok((P::drive(db, workload, cfg)?, 0));
    }
    let done = AtomicBool::new(false);
    // Held by a checkpoint of the checkpointer's, and by a crash scenario from its start.
    let checkpointing = std::sync::Mutex::new(());
    std::thread::scope(|s| {
        let checkpointer = s.spawn(|| -> Result<u64, Error> {
            let mut n = 0;
            let mut next = Instant::now() + every;
            while !every.is_zero() && !done.load(Ordering::Acquire) {
                if Instant::now() >= next {
                    let _one = checkpointing.lock().unwrap_or_else(|e| e.into_inner());
                    db.checkpoint()?;
                    n += 1;
                    next = Instant::now() + every;
                }
                std::thread::sleep(Duration::from_millis(1));
            }
            Ok(n)
        });
        let crasher = plan.crash.as_ref().map(|(phase, gate)| {
            let (checkpointing, done, acks) = (&checkpointing, &done, cfg.acks.as_ref());
            s.spawn(move || crash_at(db, *phase, gate, checkpointing, done, acks))
        });
        let stats = P::drive(db, workload, cfg);
        done.store(true, Ordering::Release);
        let n = checkpointer.join().expect("the checkpointer thread panicked");
        if let Some(c) = crasher {
            c.join().expect("the crash scenario panicked")?;
        }
        Ok((stats?, n?))
    })
}

/// `--crash-at PHASE` (under `--sync commit`): waits for the first acknowledged commits, then
/// stops the next worker to reach `phase`, takes a checkpoint (to its end, unless the worker's
/// log epoch is in flight: the checkpoint then waits for the worker, which is held 0.2 s; at
/// most 2 s, for a checkpoint that waits for the worker's locks),
/// lets the worker go, and kills the process with SIGKILL when the worker begins its next
/// transaction, having acknowledged the held one, with no checkpoint since the scenario's own.
/// `txlab recover --verify` then finds whether the checkpoint lost the commit it was taken
/// across. Returns an error only when the run ended first, or nothing happened for 10
/// minutes (a deadlock detector, not a timing assumption).
pub(super) fn crash_at<P: Protocol>(
    db: &Database<P>,
    phase: CommitPhase,
    gate: &Gate,
    checkpointing: &std::sync::Mutex<()>,
    done: &AtomicBool,
    acks: Option<&crate::engine::driver::Acks>,
) -> Result<(), Error> {
    const PATIENCE: Duration = Duration::from_secs(600);
    let fail = |what: &str| {
        Err(Error::Config(format!(
            "--crash-at {}: {what} (the run ended, or nothing happened for 10 minutes)",
            phase.name()
        )))
    };
    let log = db.log().expect("--crash-at needs a log");
    let acked = || acks.map_or(0, |a| a.file.metadata().map_or(0, |m| m.len()));
    let t0 = Instant::now();
    while acked() == 0 {
        if done.load(Ordering::Acquire) || t0.elapsed() > PATIENCE {
            return fail("no commit was acknowledged");
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    // No checkpoint of the checkpointer's from here: the next one would repair what the
    // scenario's may have lost.
    let _only = checkpointing.lock().unwrap_or_else(|e| e.into_inner());
    let stop = gate.stop(phase, Who::Any, 0);
    let Some(held) = gate.wait(stop, PATIENCE) else {
        gate.release(stop);
        return fail("no worker reached the phase");
    };
    std::thread::scope(|s| {
        // The checkpoint runs to its end while the worker is held, unless the worker's log
        // epoch is in flight: then it waits for the worker (the commit contract), which is
        // let go after 0.2 s. It may wait for the worker's locks too (2PL reads rows under a
        // shared lock): the worker is let go after 2 s in any case.
        let ckpt = s.spawn(|| db.checkpoint());
        let t = Instant::now();
        while !ckpt.is_finished() && t.elapsed() < Duration::from_secs(2) {
            if log.in_flight(held.at.worker) && t.elapsed() > Duration::from_millis(200) {
                break;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        // Under `--sync commit` the held commit returns durable, and its worker acknowledges
        // it (in the acknowledgement file) before it begins its next transaction (BOHM's
        // execution thread: its next batch), where it is stopped holding nothing (so that the
        // checkpoint, which may wait for its locks, ends): the held commit is the last the
        // file acknowledges for its worker, and recovery must find its very count.
        let thread = Who::Thread(held.thread);
        let acknowledged = gate.watch(CommitPhase::Acknowledging, thread, 0);
        let next = gate.stop_after(CommitPhase::Begun, thread, acknowledged);
        gate.release(stop);
        ckpt.join().expect("the checkpoint panicked")?;
        if gate.wait(next, PATIENCE).is_none() {
            gate.release(next);
            return fail("the held worker committed no more");
        }
        // SAFETY: kill(2) on our own process id has no memory-safety preconditions.
        unsafe { libc::kill(libc::getpid(), libc::SIGKILL) };
        unreachable!("SIGKILL ends the process")
    })
}

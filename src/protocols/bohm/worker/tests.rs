use super::*;
use crate::engine::{AccessSet, Database, Recon};
use crate::protocols::bohm::pipeline::{executing, stage, Planner};
use crate::protocols::bohm::record::PRODUCED;
use crate::protocols::bohm::Bohm;
use crate::storage::TableSpec;
use std::sync::atomic::{AtomicU32, AtomicU64};

const T: TableId = TableId(0);

/// Adds `add` to key 1 (and, when `stray`, writes key 2, which it does not declare; when
/// `peek`, reads key 3, which it does not declare either); records the value it read; rolls
/// back when `abort`; `idle` declares key 1 and touches nothing; `reader` declares a read
/// of key 1 and reads it.
#[derive(Default)]
struct Rmw {
    reader: bool,
    add: u64,
    abort: bool,
    stray: bool,
    peek: bool,
    idle: bool,
    saw: Cell<u64>,
}

impl Procedure for Rmw {
    fn txn_type(&self) -> usize {
        0
    }
    fn declare<R: Recon>(&self, _: &R, set: &mut AccessSet) -> bool {
        if self.reader {
            set.read(T, 1);
        } else {
            set.write(T, 1);
        }
        true
    }
    fn run<W: Worker>(&self, tx: &mut Tx<'_, W>) -> Result<(), Abort> {
        if self.idle {
            return Ok(());
        }
        if self.reader {
            let v = tx.read(T, 1, |r| u64::from_le_bytes(r[..8].try_into().unwrap()))?;
            self.saw.set(v.expect("key 1 exists"));
            return Ok(());
        }
        let add = self.add;
        let saw = tx.update(T, 1, |r| {
            let v = u64::from_le_bytes(r[..8].try_into().unwrap());
            r[..8].copy_from_slice(&(v + add).to_le_bytes());
            v
        })?;
        self.saw.set(saw.expect("key 1 exists"));
        if self.stray {
            tx.update(T, 2, |_| ())?;
        }
        if self.peek {
            // An undeclared read (key 3 does not exist; key 1 it declared).
            tx.read(T, 3, |_| ())?;
        }
        if self.abort {
            return Err(Abort::new(AbortReason::User));
        }
        Ok(())
    }
}

static TYPES: [TxnType; 1] = [TxnType { name: "rmw", pieces: &[] }];

/// A planned batch of `procs`, all on key 1 of a database where it holds 0.
fn setup(procs: Vec<Rmw>) -> (Database<Bohm>, Batch<Rmw>) {
    let db = Database::<Bohm>::new(&[TableSpec::new("t", 8, 64)]).unwrap();
    db.loader().insert(T, 1, &0u64.to_le_bytes()).unwrap();
    let batch = plan(&db, procs);
    (db, batch)
}

/// `procs` declared in order, numbered and planned by one CC thread, as batch 0.
fn plan<Q: Procedure>(db: &Database<Bohm>, procs: Vec<Q>) -> Batch<Q> {
    let n = procs.len();
    let batch = Batch {
        slots: procs.into_iter().map(|p| Slot::new(p, 0)).collect(),
        stage: AtomicU64::new(stage::of(0, stage::SEQUENCED)),
        number: AtomicU64::new(0),
        len: AtomicU32::new(n as u32),
        done: AtomicU32::new(0),
        cursor: AtomicU32::new(0),
    };
    for (i, slot) in batch.slots.iter().enumerate() {
        // SAFETY: the test owns the batch.
        unsafe {
            let set = &mut *slot.set.get();
            (*slot.proc.get()).declare(db, set);
            set.seal();
            slot.plan_writes(db.protocol().units(), &crate::storage::index::pin(), true).unwrap();
        }
        slot.ts.store(Batch::<Q>::ts_of(0, n, i), Ordering::Relaxed);
    }
    {
        let stores = db.protocol().stores();
        let mut ctx = db.worker_ctx().unwrap();
        let mut planner = Planner::new(stores, db.protocol().units(), 0, 1);
        planner.plan(&mut ctx, &batch, 0).unwrap();
    }
    batch.stage.store(stage::of(0, stage::PLANNED), Ordering::Release);
    batch
}

fn run_at<Q: Procedure>(
    env: &Env<'_, Q>,
    i: usize,
    pads: &mut [Scratchpad],
    abandoned: &Abandoned,
) -> Result<Outcome, Abort> {
    let slot = &env.ring[0].slots[i];
    slot.state
        .compare_exchange(
            slot_state::UNPROCESSED,
            slot_state::EXECUTING,
            Ordering::Acquire,
            Ordering::Relaxed,
        )
        .expect("unprocessed");
    let (pad, deeper) = pads.split_first_mut().unwrap();
    let g = crate::storage::index::pin();
    run_slot(env, &g, slot, pad, deeper, abandoned, &mut Heap::new(1))
}

/// The execution environment of a test batch.
fn env_of<'a, Q>(db: &'a Database<Bohm>, batch: &'a Batch<Q>) -> Env<'a, Q> {
    Env {
        storage: db.storage(),
        stores: db.protocol().stores(),
        ring: std::slice::from_ref(batch),
        types: &TYPES,
        templates: false,
        units: db.protocol().units(),
        // One execution thread, at batch 0.
        finished: Box::leak(Box::new([CachePadded::new(AtomicU64::new(0))])),
        size: batch.slots.len(),
        acks: None,
    }
}

fn value(db: &Database<Bohm>) -> u64 {
    db.peek(T, 1, |r| u64::from_le_bytes(r[..8].try_into().unwrap())).unwrap()
}

#[test]
fn a_chain_run_from_its_end_evaluates_its_dependencies_in_order() {
    // Slots 0..6 add 1 << i; slot 3 rolls back; slot 6 declares key 1 and writes nothing
    // and runs first, before its predecessors: it passes their value on; slot 7 adds 128
    // and reads through slot 6.
    let mut procs: Vec<Rmw> =
        (0..6).map(|i| Rmw { add: 1 << i, abort: i == 3, ..Default::default() }).collect();
    procs.push(Rmw { idle: true, ..Default::default() });
    procs.push(Rmw { add: 128, ..Default::default() });
    let (db, batch) = setup(procs);
    let env = env_of(&db, &batch);
    let mut pads: Vec<Scratchpad> = (0..10).map(|_| Scratchpad::default()).collect();
    let abandoned = Abandoned::default();
    assert_eq!(run_at(&env, 6, &mut pads, &abandoned), Ok(Outcome::Committed));
    let slot6 = &batch.slots[6];
    // SAFETY: complete; the test owns the batch.
    let v6 = unsafe { &*(&*slot6.placeholders.get())[0].load(Ordering::Relaxed) };
    assert_eq!(v6.flags.load(Ordering::Relaxed), PRODUCED | PASS, "its predecessor is pending");
    assert_eq!(batch.slots[5].state.load(Ordering::Relaxed), slot_state::UNPROCESSED);
    // Slot 7 needs 6, which passes to 5, which needs 4, ... 0: all run here, in order.
    assert_eq!(run_at(&env, 7, &mut pads, &abandoned), Ok(Outcome::Committed));
    let committed = 0b110111u64;
    for (i, slot) in batch.slots.iter().enumerate() {
        assert_eq!(slot.state.load(Ordering::Relaxed), slot_state::COMPLETE, "slot {i}");
        // SAFETY: complete; the test owns the batch.
        let p = unsafe { &*slot.proc.get() };
        if !p.idle {
            let want = committed & ((1u64 << i.min(6)) - 1);
            assert_eq!(p.saw.get(), want, "slot {i} read the value of the slots before it");
        }
    }
    assert_eq!(batch.slots[3].outcome.load(Ordering::Relaxed), Outcome::User as u8);
    assert_eq!(value(&db), committed + 128);
    assert_eq!(abandoned.deepest.get(), NO_PRODUCER);
    assert_eq!(abandoned.busy.get(), NO_PRODUCER);
}

#[test]
fn annotated_reads_see_the_version_below_them_without_the_chain() {
    let reader = || Rmw { reader: true, ..Default::default() };
    let procs = vec![
        Rmw { add: 1, ..Default::default() },
        reader(),
        Rmw { add: 2, ..Default::default() },
        reader(),
    ];
    let (db, batch) = setup(procs);
    let env = env_of(&db, &batch);
    // SAFETY: planned; the test owns the batch.
    let (refs, ph) = unsafe {
        let refs = |i: usize| {
            let s = &batch.slots[i];
            assert_eq!(*s.reads.get(), [(T, 1)], "slot {i} reads key 1");
            (&*s.read_refs.get())[0].load(Ordering::Relaxed)
        };
        let ph = |i: usize| (&*batch.slots[i].placeholders.get())[0].load(Ordering::Relaxed);
        ([refs(1), refs(3)], [ph(0), ph(2)])
    };
    assert_eq!(refs, ph, "each read sees the placeholder of the write before it");
    let mut pads: Vec<Scratchpad> = (0..4).map(|_| Scratchpad::default()).collect();
    let abandoned = Abandoned::default();
    // The last reader first: it runs the writers below it; then the first reader.
    assert_eq!(run_at(&env, 3, &mut pads, &abandoned), Ok(Outcome::Committed));
    assert_eq!(run_at(&env, 1, &mut pads, &abandoned), Ok(Outcome::Committed));
    // SAFETY: complete; the test owns the batch.
    let saw = |i: usize| unsafe { &*batch.slots[i].proc.get() }.saw.get();
    assert_eq!((saw(1), saw(3)), (1, 3));
    assert_eq!(value(&db), 3);
}

#[test]
fn a_chain_deeper_than_the_scratchpads_is_abandoned_naming_its_deepest_producer() {
    let procs: Vec<Rmw> = (0..6).map(|i| Rmw { add: 1 << i, ..Default::default() }).collect();
    let (db, batch) = setup(procs);
    let env = env_of(&db, &batch);
    let mut pads: Vec<Scratchpad> = (0..3).map(|_| Scratchpad::default()).collect();
    let abandoned = Abandoned::default();
    // 5 runs 4 and 3 deeper; 3 cannot run 2.
    let a = run_at(&env, 5, &mut pads, &abandoned).unwrap_err();
    assert_eq!(a.reason, AbortReason::DependencyBusy);
    let deepest = abandoned.deepest.replace(NO_PRODUCER);
    assert_eq!(deepest, (Batch::<Rmw>::producer(0, 2), 3), "slot 2, at 3");
    assert_eq!(abandoned.busy.get(), NO_PRODUCER);
    for i in [3, 4, 5] {
        assert_eq!(batch.slots[i].state.load(Ordering::Relaxed), slot_state::UNPROCESSED, "{i}");
    }
    // The execution loop runs the named producer at the top (it reaches 0 within bounds),
    // then the chain's end again.
    assert_eq!(run_at(&env, 2, &mut pads, &abandoned), Ok(Outcome::Committed));
    assert_eq!(run_at(&env, 5, &mut pads, &abandoned), Ok(Outcome::Committed));
    assert_eq!(value(&db), 0b111111);
    // A dependency another thread is running abandons naming it as busy, and the loop's
    // test says so until that thread hands it back.
    let (db, batch) =
        setup(vec![Rmw { add: 1, ..Default::default() }, Rmw { add: 2, ..Default::default() }]);
    let env = env_of(&db, &batch);
    batch.slots[0].state.store(slot_state::EXECUTING, Ordering::Relaxed);
    let a = run_at(&env, 1, &mut pads, &abandoned).unwrap_err();
    assert_eq!(a.reason, AbortReason::DependencyBusy);
    assert_eq!(abandoned.deepest.get(), NO_PRODUCER);
    let busy = abandoned.busy.replace(NO_PRODUCER);
    assert_eq!(busy, (Batch::<Rmw>::producer(0, 0), 1), "slot 0, at 1");
    assert_eq!(batch.slots[1].state.load(Ordering::Relaxed), slot_state::UNPROCESSED);
    assert!(executing(env.ring, busy.0, busy.1));
    batch.slots[0].state.store(slot_state::UNPROCESSED, Ordering::Relaxed);
    assert!(!executing(env.ring, busy.0, busy.1));
    assert_eq!(run_at(&env, 1, &mut pads, &abandoned), Ok(Outcome::Committed));
    assert_eq!(value(&db), 3);
}

#[test]
fn an_undeclared_write_rolls_back_for_resubmission() {
    let (db, batch) = setup(vec![
        Rmw { add: 1, ..Default::default() },
        Rmw { add: 2, stray: true, ..Default::default() },
        Rmw { add: 4, ..Default::default() },
    ]);
    let env = env_of(&db, &batch);
    let mut pads: Vec<Scratchpad> = (0..4).map(|_| Scratchpad::default()).collect();
    let abandoned = Abandoned::default();
    assert_eq!(run_at(&env, 2, &mut pads, &abandoned), Ok(Outcome::Committed));
    assert_eq!(batch.slots[1].outcome.load(Ordering::Relaxed), Outcome::Resubmit as u8);
    // SAFETY: complete; the test owns the batch.
    assert_eq!(unsafe { &*batch.slots[2].proc.get() }.saw.get(), 1, "slot 1 left no trace");
    assert_eq!(value(&db), 5);
}

/// An operation on table `T` once it is in unit mode ([`super::super::units`]).
enum UnitOp {
    /// Inserts `key` holding `value`, declaring a write range over keys 0 to 15.
    Insert { key: u64, value: u64 },
    /// Adds 1 to `key`, declaring the key (a write of its unit in unit mode).
    Bump { key: u64 },
    /// Reads keys 0 to 15 (undeclared): their number and their sum.
    Scan,
}

struct UnitTxn {
    op: UnitOp,
    saw: Cell<(u64, u64)>,
}

impl UnitTxn {
    fn new(op: UnitOp) -> Self {
        UnitTxn { op, saw: Cell::new((0, 0)) }
    }
}

impl Procedure for UnitTxn {
    fn txn_type(&self) -> usize {
        0
    }
    fn declare<R: Recon>(&self, _: &R, set: &mut AccessSet) -> bool {
        match self.op {
            UnitOp::Insert { .. } => set.range(T, 0, 15, crate::engine::AccessMode::Write),
            UnitOp::Bump { key } => set.write(T, key),
            UnitOp::Scan => {}
        }
        true
    }
    fn run<W: Worker>(&self, tx: &mut Tx<'_, W>) -> Result<(), Abort> {
        let get = |r: &[u8]| u64::from_le_bytes(r[..8].try_into().unwrap());
        match self.op {
            UnitOp::Insert { key, value } => {
                tx.insert(T, key, &value.to_le_bytes())?;
            }
            UnitOp::Bump { key } => {
                let v = tx.update(T, key, |r| {
                    let v = get(r);
                    r[..8].copy_from_slice(&(v + 1).to_le_bytes());
                    v
                })?;
                self.saw.set((1, v.expect("inserted before")));
            }
            UnitOp::Scan => {
                let (mut n, mut sum) = (0, 0);
                tx.scan(T, 0, 15, 16, |_, r| {
                    n += 1;
                    sum += get(r);
                    ControlFlow::Continue(())
                })?;
                self.saw.set((n, sum));
            }
        }
        Ok(())
    }
}

/// A write range puts the table in unit mode: a later declared key becomes a write of its
/// unit, and every transaction on the unit, run from the end of the batch, first runs the
/// unit's earlier writers, recursively, so it sees the rows they pushed.
#[test]
fn unit_writers_run_in_timestamp_order_and_readers_after_them() {
    use UnitOp::*;
    let db = Database::<Bohm>::new(&[TableSpec::new("t", 8, 64)]).unwrap();
    let batch = plan(
        &db,
        vec![
            UnitTxn::new(Scan),
            UnitTxn::new(Insert { key: 3, value: 7 }),
            UnitTxn::new(Insert { key: 5, value: 1 }),
            UnitTxn::new(Bump { key: 3 }),
            UnitTxn::new(Scan),
            UnitTxn::new(Bump { key: 5 }),
        ],
    );
    let units = db.protocol().units();
    assert_eq!(units.shift(T), Some(4), "the range [0, 15] is one unit");
    // SAFETY: planned; nothing else runs.
    let (keys, unit_writes) =
        unsafe { (&*batch.slots[3].writes.get(), &*batch.slots[3].units.get()) };
    assert!(keys.is_empty() && unit_writes == &[(T, 0)], "the bump writes the unit");
    let env = env_of(&db, &batch);
    let mut pads: Vec<Scratchpad> = (0..6).map(|_| Scratchpad::default()).collect();
    let abandoned = Abandoned::default();
    assert_eq!(run_at(&env, 4, &mut pads, &abandoned), Ok(Outcome::Committed));
    // SAFETY: the slots read are complete, and this test is the only thread.
    let saw = |i: usize| unsafe { &*batch.slots[i].proc.get() }.saw.get();
    assert_eq!(saw(4), (2, 8 + 1), "the scan at 5 sees both inserts and the bump of 3");
    assert_eq!(saw(3), (1, 7));
    for i in [1, 2, 3] {
        assert_eq!(batch.slots[i].state.load(Ordering::Relaxed), slot_state::COMPLETE);
    }
    assert_eq!(run_at(&env, 0, &mut pads, &abandoned), Ok(Outcome::Committed));
    assert_eq!(saw(0), (0, 0), "the scan at 1 sees nothing: it comes first");
    assert_eq!(run_at(&env, 5, &mut pads, &abandoned), Ok(Outcome::Committed));
    assert_eq!(saw(5), (1, 1));
    let v = |k| db.peek(T, k, |r| u64::from_le_bytes(r[..8].try_into().unwrap()));
    assert_eq!((v(3), v(5)), (Some(8), Some(2)));
}

/// BOHM needs only the write set: an undeclared read commits.
#[test]
fn an_undeclared_read_commits() {
    let (db, batch) = setup(vec![Rmw { add: 3, peek: true, ..Default::default() }]);
    let env = env_of(&db, &batch);
    let mut pads: Vec<Scratchpad> = (0..2).map(|_| Scratchpad::default()).collect();
    let abandoned = Abandoned::default();
    assert_eq!(run_at(&env, 0, &mut pads, &abandoned), Ok(Outcome::Committed));
    assert_eq!(value(&db), 3);
}

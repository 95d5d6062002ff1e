use super::*;

/// Cicada-SV's search reads a version's stamp and status as one: under a writer that
/// overwrites the version in place, alternating a row (odd stamps) and a deletion (even
/// ones), every search's `present` matches the stamp it reports. Reading the status
/// outside the seqlock window pairs one overwrite's status with another's stamp.
#[test]
fn single_version_search_reads_stamp_and_status_together() {
    // SAFETY: a record head is atomics only, and all-zero is a valid, empty head (see
    // `RecordHeader for CicadaRecord`); no payload is read or written here.
    let rec: CicadaRecord = unsafe { std::mem::zeroed() };
    let v = rec.inline();
    overwrite(v, 1, COMMITTED, || {});
    const READERS: usize = 3;
    const SEARCHES: u64 = 300_000;
    let finished = std::sync::atomic::AtomicUsize::new(0);
    std::thread::scope(|s| {
        s.spawn(|| {
            // Overwrites until every reader is done, so that all searches race with it.
            let mut stamp = 2;
            while finished.load(Ordering::Acquire) < READERS {
                overwrite(v, stamp, if stamp % 2 == 1 { COMMITTED } else { DELETED }, || {});
                stamp += 1;
            }
        });
        for _ in 0..READERS {
            s.spawn(|| {
                // Counted when the reader ends, also by a failed assertion's unwinding,
                // so that the writer stops either way.
                struct Finish<'a>(&'a std::sync::atomic::AtomicUsize);
                impl Drop for Finish<'_> {
                    fn drop(&mut self) {
                        self.0.fetch_add(1, Ordering::Release);
                    }
                }
                let _finish = Finish(&finished);
                for _ in 0..SEARCHES {
                    let found = sv_search(&rec, Some(v), WRITING - 1, true).expect("waits");
                    assert!(found.seen.is_some(), "the version is always committed");
                    assert_eq!(
                        found.present,
                        found.wts % 2 == 1,
                        "stamp {} reported with the status of another overwrite",
                        found.wts
                    );
                }
            });
        }
    });
}

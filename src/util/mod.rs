//! Small utilities at the bottom of the layer stack, used by every layer above: a spin-wait
//! that yields under oversubscription, a timed busy-wait, and serde helpers.

/// Busy-waits for `d` (a transaction that stays busy holding what it touched: YCSB's long
/// transactions, SmallBank's and specs' think time), returning at once for zero.
#[inline]
pub fn spin_for(d: std::time::Duration) {
    if d.is_zero() {
        return;
    }
    let until = std::time::Instant::now() + d;
    while std::time::Instant::now() < until {
        std::hint::spin_loop();
    }
}

/// Spins politely: `spin_loop` hints first, then yields the core so that a lock holder that was
/// descheduled (more threads than cores) can run.
pub struct SpinWait {
    n: u32,
    spins: u32,
}

impl Default for SpinWait {
    /// 64 `spin_loop` hints, then yields.
    fn default() -> Self {
        SpinWait::spinning(64)
    }
}

impl SpinWait {
    /// `spins` `spin_loop` hints, then yields.
    #[inline]
    pub fn spinning(spins: u32) -> Self {
        SpinWait { n: 0, spins }
    }

    /// Whether the spinning is over and each further call yields.
    #[inline]
    pub fn exhausted(&self) -> bool {
        self.n > self.spins
    }

    /// Waits a little longer each call.
    #[inline]
    pub fn spin(&mut self) {
        self.n += 1;
        if self.n <= self.spins {
            std::hint::spin_loop();
        } else {
            std::thread::yield_now();
        }
    }
}

/// Serializes a duration as seconds (a number), as results and scripts expect.
pub fn serialize_secs<S: serde::Serializer>(
    d: &std::time::Duration,
    s: S,
) -> Result<S::Ok, S::Error> {
    s.serialize_f64(d.as_secs_f64())
}

pub mod shared_writes;

//! [`Backoff`]: the one doubling wait kesoku uses between tries (the LLM
//! retry, the agent's store calls and lease, PostgreSQL's reconnections).
//! It computes delays only; the caller sleeps, so it needs no runtime.

use std::time::Duration;

/// How a delay is drawn below its ceiling (the doubled, capped wait).
///
/// Jitter keeps many clients that failed together (a database restart, a
/// rate limit) from trying again together.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Jitter {
    /// Uniform in `[0, ceiling]`: the widest spread, so the least
    /// contention; for callers where an early try costs little.
    #[default]
    Full,
    /// Uniform in `[ceiling / 2, ceiling]`: still spread, but never less
    /// than half the wait; for loops that must not hammer a server that
    /// is down (reconnections).
    Equal,
    /// The ceiling itself: no randomness.
    None,
}

/// Exponential backoff: `initial`, doubling each try up to `max`, drawn by
/// a [`Jitter`] (full by default), and ended, if given a budget, once the
/// delays handed out would add up to more than it.
///
/// It is synchronous and keeps no clock: [`next_delay`](Self::next_delay)
/// says how long to wait, and the caller sleeps (in whichever runtime).
/// The budget counts those delays only, not the time spent between them.
///
/// ```
/// use std::time::Duration;
/// use kesoku_core::{Backoff, Jitter};
///
/// let ms = Duration::from_millis;
/// let mut backoff = Backoff::new(ms(100), ms(350))
///     .with_jitter(Jitter::None)
///     .with_budget(ms(1000));
/// assert_eq!(backoff.next_delay(), Some(ms(100)));
/// assert_eq!(backoff.next_delay(), Some(ms(200)));
/// assert_eq!(backoff.next_delay(), Some(ms(350))); // capped
/// assert_eq!(backoff.next_delay(), Some(ms(350))); // 1000 spent in all
/// assert_eq!(backoff.next_delay(), None); // the budget is spent
///
/// // After a success, the next failure starts over.
/// backoff.reset();
/// assert_eq!(backoff.next_delay(), Some(ms(100)));
///
/// // With jitter (full by default), a delay is at most its ceiling; a
/// // seed makes the draws repeatable.
/// let mut jittered = Backoff::new(ms(100), ms(350)).with_seed(7);
/// let delay = jittered.next_delay().unwrap();
/// assert!(delay <= ms(100));
/// assert_eq!(Backoff::new(ms(100), ms(350)).with_seed(7).next_delay(), Some(delay));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Backoff {
    initial: Duration,
    max: Duration,
    jitter: Jitter,
    budget: Option<Duration>,
    /// Delays handed out since the last reset.
    tries: u32,
    /// Their sum.
    spent: Duration,
    /// Set once a delay did not fit the budget: it stays ended (a smaller
    /// draw later must not start it again) until [`reset`](Self::reset).
    ended: bool,
    rng: fastrand::Rng,
}

impl Backoff {
    /// From `initial`, doubling up to `max` (a `max` below `initial` caps
    /// every delay at `max`), with full jitter and no budget.
    #[must_use]
    pub fn new(initial: Duration, max: Duration) -> Self {
        Backoff {
            initial,
            max,
            jitter: Jitter::Full,
            budget: None,
            tries: 0,
            spent: Duration::ZERO,
            ended: false,
            rng: fastrand::Rng::new(),
        }
    }

    /// How delays are drawn below their ceiling.
    #[must_use]
    pub fn with_jitter(mut self, jitter: Jitter) -> Self {
        self.jitter = jitter;
        self
    }

    /// Ends the backoff ([`next_delay`](Self::next_delay) gives `None`)
    /// once the next delay would bring the delays handed out to more than
    /// `budget`.
    #[must_use]
    pub fn with_budget(mut self, budget: Duration) -> Self {
        self.budget = Some(budget);
        self
    }

    /// Draws the jitter from a generator seeded with `seed`, so that the
    /// delays repeat (for tests).
    #[must_use]
    pub fn with_seed(mut self, seed: u64) -> Self {
        self.rng = fastrand::Rng::with_seed(seed);
        self
    }

    /// The first delay's ceiling.
    pub fn initial(&self) -> Duration {
        self.initial
    }

    /// The longest delay.
    pub fn max(&self) -> Duration {
        self.max
    }

    /// Delays handed out by [`next_delay`](Self::next_delay) since the
    /// last reset.
    pub fn tries(&self) -> u32 {
        self.tries
    }

    /// Their sum, what the budget is measured against.
    pub fn spent(&self) -> Duration {
        self.spent
    }

    /// The next delay, or `None` once the budget is spent.
    pub fn next_delay(&mut self) -> Option<Duration> {
        if self.ended {
            return None;
        }
        let delay = self.delay(self.tries);
        let spent = self.spent.saturating_add(delay);
        if self.budget.is_some_and(|budget| spent > budget) {
            self.ended = true;
            return None;
        }
        self.spent = spent;
        self.tries = self.tries.saturating_add(1);
        Some(delay)
    }

    /// Starts over, from the initial delay with the whole budget (after a
    /// success, say).
    pub fn reset(&mut self) {
        self.tries = 0;
        self.spent = Duration::ZERO;
        self.ended = false;
    }

    /// The ceiling of delay `n` (0 for the first): `initial · 2ⁿ`, capped
    /// at the longest delay, without jitter.
    pub fn ceiling(&self, n: u32) -> Duration {
        // 2³¹ doublings saturate any non-zero duration; beyond, the factor
        // would overflow.
        self.initial
            .saturating_mul(1_u32 << n.min(31))
            .min(self.max)
    }

    /// Delay `n` (0 for the first), jittered, without counting it against
    /// the budget or moving [`next_delay`](Self::next_delay) on: for a
    /// caller that numbers its tries itself.
    pub fn delay(&mut self, n: u32) -> Duration {
        let ceiling = self.ceiling(n);
        // Whole nanoseconds, so no float can round past the ceiling; a
        // ceiling beyond u64 nanoseconds (584 years) is not drawn below.
        let Ok(nanos) = u64::try_from(ceiling.as_nanos()) else {
            return ceiling;
        };
        let nanos = match self.jitter {
            Jitter::Full => self.rng.u64(0..=nanos),
            Jitter::Equal => nanos / 2 + self.rng.u64(0..=nanos - nanos / 2),
            Jitter::None => nanos,
        };
        Duration::from_nanos(nanos)
    }
}

/// [`Backoff::next_delay`] as an iterator: it ends with the budget.
impl Iterator for Backoff {
    type Item = Duration;

    fn next(&mut self) -> Option<Duration> {
        self.next_delay()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn grows_by_doubling_until_the_cap() {
        let mut b = Backoff::new(ms(10), ms(100)).with_jitter(Jitter::None);
        let delays: Vec<_> = (&mut b).take(7).collect();
        assert_eq!(
            delays,
            [ms(10), ms(20), ms(40), ms(80), ms(100), ms(100), ms(100)]
        );
        assert_eq!(b.tries(), 7);
        assert_eq!(b.spent(), ms(450));
    }

    #[test]
    fn ceiling_is_capped_and_never_overflows() {
        let b = Backoff::new(ms(500), Duration::from_secs(60));
        assert_eq!(b.ceiling(0), ms(500));
        assert_eq!(b.ceiling(3), ms(4000));
        assert_eq!(b.ceiling(7), Duration::from_secs(60));
        assert_eq!(b.ceiling(u32::MAX), Duration::from_secs(60));
        // Without a cap, the factor stops at 2³¹ and the product saturates.
        let unbounded = Backoff::new(Duration::from_secs(1), Duration::MAX);
        assert_eq!(unbounded.ceiling(u32::MAX), Duration::from_secs(1 << 31));
        let huge = Backoff::new(Duration::MAX / 2, Duration::MAX);
        assert_eq!(huge.ceiling(u32::MAX), Duration::MAX);
        // A cap below the first delay caps that too.
        assert_eq!(Backoff::new(ms(50), ms(20)).ceiling(0), ms(20));
    }

    #[test]
    fn jitter_stays_within_its_bounds() {
        for seed in 0..200 {
            let mut full = Backoff::new(ms(10), ms(1000)).with_seed(seed);
            let mut equal = Backoff::new(ms(10), ms(1000))
                .with_jitter(Jitter::Equal)
                .with_seed(seed);
            for n in 0..10 {
                let ceiling = full.ceiling(n);
                let d = full.next_delay().unwrap();
                assert!(d <= ceiling, "full, try {n}: {d:?} > {ceiling:?}");
                let d = equal.next_delay().unwrap();
                assert!(
                    d >= ceiling / 2 && d <= ceiling,
                    "equal, try {n}: {d:?} outside [{:?}, {ceiling:?}]",
                    ceiling / 2
                );
            }
        }
        // Jitter spreads: over many draws, full jitter is not constant.
        let mut b = Backoff::new(ms(1000), ms(1000)).with_seed(1);
        let draws: std::collections::HashSet<_> = (&mut b).take(20).collect();
        assert!(draws.len() > 10, "{draws:?}");
        // A ceiling past u64 nanoseconds is given as it is, not drawn.
        assert_eq!(
            Backoff::new(Duration::MAX, Duration::MAX).delay(0),
            Duration::MAX
        );
    }

    #[test]
    fn a_seed_repeats_the_delays() {
        let draw = |seed| -> Vec<_> {
            Backoff::new(ms(10), ms(1000))
                .with_seed(seed)
                .take(8)
                .collect()
        };
        assert_eq!(draw(42), draw(42));
        assert_ne!(draw(42), draw(43));
    }

    #[test]
    fn the_budget_ends_it_and_it_stays_ended() {
        let mut b = Backoff::new(ms(10), ms(40))
            .with_jitter(Jitter::None)
            .with_budget(ms(100));
        // 10 + 20 + 40 = 70; another 40 would make 110.
        assert_eq!((&mut b).collect::<Vec<_>>(), [ms(10), ms(20), ms(40)]);
        assert_eq!(b.next_delay(), None);
        assert_eq!(b.spent(), ms(70));
        // With jitter, the sum handed out never passes the budget, and once
        // ended it stays ended even though a smaller draw might fit.
        for seed in 0..100 {
            let mut b = Backoff::new(ms(10), ms(40))
                .with_budget(ms(100))
                .with_seed(seed);
            let total: Duration = (&mut b).sum();
            assert!(total <= ms(100), "seed {seed}: {total:?}");
            assert_eq!(b.next_delay(), None);
            assert_eq!(b.next_delay(), None);
        }
        // A budget of zero ends it at once, unless a delay is zero.
        let mut b = Backoff::new(ms(10), ms(10))
            .with_jitter(Jitter::None)
            .with_budget(Duration::ZERO);
        assert_eq!(b.next_delay(), None);
    }

    #[test]
    fn reset_starts_over_with_the_whole_budget() {
        let mut b = Backoff::new(ms(10), ms(1000))
            .with_jitter(Jitter::None)
            .with_budget(ms(30));
        assert_eq!(b.next_delay(), Some(ms(10)));
        assert_eq!(b.next_delay(), Some(ms(20)));
        assert_eq!(b.next_delay(), None);
        b.reset();
        assert_eq!((b.tries(), b.spent()), (0, Duration::ZERO));
        assert_eq!(b.next_delay(), Some(ms(10)));
        assert_eq!(b.next_delay(), Some(ms(20)));
    }

    #[test]
    fn delay_n_leaves_the_sequence_alone() {
        let mut b = Backoff::new(ms(10), ms(1000)).with_jitter(Jitter::None);
        assert_eq!(b.delay(3), ms(80));
        assert_eq!(b.tries(), 0);
        assert_eq!(b.next_delay(), Some(ms(10)));
    }
}

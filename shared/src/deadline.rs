//! [`Deadline`]: the time by which an invocation must have finished.
//!
//! Lambda bills the whole invocation and kills it at its deadline. Waiting (for a gate
//! slot, for a backoff) and calling the upstream are only started when they can finish
//! before it, with [`crate::policy::DEADLINE_SAFETY_MARGIN`] to spare.

use std::time::{Duration, Instant};

use crate::policy::DEADLINE_SAFETY_MARGIN;

/// An optional point in time, on the process' monotonic clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Deadline(Option<Instant>);

impl Deadline {
    /// No deadline: a CLI run, a test.
    pub const NONE: Deadline = Deadline(None);

    /// A deadline `d` from now.
    pub fn after(d: Duration) -> Self {
        Deadline(Instant::now().checked_add(d))
    }

    /// From a Lambda context's deadline in epoch milliseconds. A missing, past or
    /// nonsensical value (local emulators send 0 or far futures) gives a usable result:
    /// 0 means none; more than 15 minutes away (Lambda's maximum) is clamped to 15 minutes.
    pub fn from_epoch_millis(deadline_ms: u64, now: std::time::SystemTime) -> Self {
        const LAMBDA_MAX: Duration = Duration::from_secs(15 * 60);
        if deadline_ms == 0 {
            return Deadline::NONE;
        }
        let target = std::time::UNIX_EPOCH + Duration::from_millis(deadline_ms);
        let left = target.duration_since(now).unwrap_or(Duration::ZERO);
        Deadline::after(left.min(LAMBDA_MAX))
    }

    /// The sooner of the two (none is later than any).
    pub fn sooner(self, other: Deadline) -> Self {
        match (self.0, other.0) {
            (Some(a), Some(b)) => Deadline(Some(a.min(b))),
            (a, b) => Deadline(a.or(b)),
        }
    }

    /// The same deadline, `d` earlier (to keep room for work that must follow).
    pub fn earlier_by(&self, d: Duration) -> Self {
        Deadline(self.0.map(|at| at.checked_sub(d).unwrap_or_else(Instant::now)))
    }

    /// Time left before the deadline minus the safety margin; `None` without a deadline.
    pub fn usable(&self) -> Option<Duration> {
        self.0.map(|at| {
            at.saturating_duration_since(Instant::now())
                .saturating_sub(DEADLINE_SAFETY_MARGIN)
        })
    }

    /// `bound`, shortened to what is usable before the deadline.
    pub fn cap(&self, bound: Duration) -> Duration {
        self.usable().map_or(bound, |left| left.min(bound))
    }

    /// True when `needed` fits in what is usable.
    pub fn allows(&self, needed: Duration) -> bool {
        self.usable().is_none_or(|left| left >= needed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{SystemTime, UNIX_EPOCH};

    #[test]
    fn none_allows_everything() {
        assert!(Deadline::NONE.allows(Duration::from_secs(3600)));
        assert_eq!(
            Deadline::NONE.cap(Duration::from_secs(30)),
            Duration::from_secs(30)
        );
    }

    #[test]
    fn margin_is_kept() {
        let d = Deadline::after(Duration::from_millis(400));
        assert_eq!(
            d.usable(),
            Some(Duration::ZERO),
            "400 ms is inside the 500 ms margin"
        );
        assert!(!d.allows(Duration::from_millis(1)));
        let d = Deadline::after(Duration::from_secs(10));
        assert!(d.cap(Duration::from_secs(30)) <= Duration::from_millis(9500));
    }

    #[test]
    fn earlier_by_keeps_one_margin() {
        let d = Deadline::after(Duration::from_secs(10)).earlier_by(Duration::from_secs(2));
        let usable = d.usable().expect("deadline");
        assert!(
            usable <= Duration::from_millis(7500) && usable > Duration::from_millis(7000),
            "{usable:?}"
        );
        assert_eq!(Deadline::NONE.earlier_by(Duration::from_secs(2)), Deadline::NONE);
    }

    #[test]
    fn odd_lambda_deadlines_are_tamed() {
        let now = SystemTime::now();
        assert_eq!(Deadline::from_epoch_millis(0, now), Deadline::NONE);
        let past = Deadline::from_epoch_millis(1, now);
        assert_eq!(past.usable(), Some(Duration::ZERO));
        let epoch_ms = now
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_millis() as u64)
            .unwrap_or(0);
        let far = Deadline::from_epoch_millis(epoch_ms + 86_400_000, now);
        assert!(far.usable().is_some_and(|l| l <= Duration::from_secs(15 * 60)));
    }
}

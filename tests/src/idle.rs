//! Idle-while-due: how long the key sat unused while work waited for it.
//!
//! # Definition
//! Work is *due* at a moment when a retry-queue entry is due (waiting to be claimed, or
//! claimed by a drainer and not yet settled) and no cooldown holds the gate: a call could
//! start. The key is *idle* at a moment `t` when no call started in `(t − allowance, t]`,
//! where `allowance` is one gate slot and the lateness a holder is allowed (the gate's
//! interval + tolerance): a key called at its pace is never idle. Idle-while-due is the
//! time, in seconds, that was both.
//!
//! Call starts are what the upstream saw (the look-alike's arrivals, a 429 included: the
//! slot was used); "due" is sampled (the demo asks Redis every 250 ms), each sample holding
//! until the next, so the figure is as fine as the sampling. Both must be on one clock
//! (epoch ms on one machine: the look-alike, Redis and the sampler share it).

use std::time::Duration;

use lawsync::gate::Gate;
use lawsync::queue::RetryQueue;

/// Whether work was due at `at_ms` (epoch ms); it holds until the next sample.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DueSample {
    pub at_ms: f64,
    pub due: bool,
}

/// Seconds during which work was due and no call had started for more than `allowance`
/// (see the module's definition). `starts_ms`: call starts, epoch ms, in any order;
/// `samples`: in time order. The last sample closes the measured span.
pub fn idle_while_due(starts_ms: &[f64], samples: &[DueSample], allowance: Duration) -> f64 {
    let allowance_ms = allowance.as_secs_f64() * 1000.0;
    let mut starts = starts_ms.to_vec();
    starts.sort_by(f64::total_cmp);
    // The moments a call covers: [start, start + allowance), merged.
    let mut covered: Vec<(f64, f64)> = Vec::new();
    for s in starts {
        match covered.last_mut() {
            Some((_, end)) if s <= *end => *end = end.max(s + allowance_ms),
            _ => covered.push((s, s + allowance_ms)),
        }
    }
    let mut idle_ms = 0.0;
    for pair in samples.windows(2) {
        let (a, b) = (pair[0].at_ms, pair[1].at_ms);
        if !pair[0].due || b <= a {
            continue;
        }
        // The first covered span that ends after `a`.
        let first = covered.partition_point(|&(_, end)| end <= a);
        let mut busy = 0.0;
        for &(s, e) in covered[first..].iter().take_while(|&&(s, _)| s < b) {
            busy += e.min(b) - s.max(a);
        }
        idle_ms += (b - a) - busy;
    }
    idle_ms / 1000.0
}

/// One sample, from Redis: is a retry-queue entry due or in hand, with no cooldown on the
/// gate? `at_ms` is the sampler's clock, read when the answers are in.
pub async fn sample_due(queue: &RetryQueue, gate: &Gate) -> Option<DueSample> {
    let stats = queue.stats().await.ok()?;
    let status = gate.status().await.ok()?;
    let work = stats.due_now + stats.in_flight > 0;
    Some(DueSample {
        at_ms: lawsync::clock::epoch_millis_f64(std::time::SystemTime::now()),
        due: work && status.cooldown.is_none(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn due(spans: &[(f64, bool)]) -> Vec<DueSample> {
        spans
            .iter()
            .map(|&(at_ms, due)| DueSample { at_ms, due })
            .collect()
    }

    const ALLOW: Duration = Duration::from_millis(100);

    #[test]
    fn a_key_called_at_its_pace_is_never_idle() {
        let starts: Vec<f64> = (0..10).map(|i| f64::from(i) * 100.0).collect();
        let samples = due(&[(0.0, true), (950.0, true)]);
        assert_eq!(idle_while_due(&starts, &samples, ALLOW), 0.0);
    }

    #[test]
    fn a_gap_counts_only_past_the_allowance_and_only_while_due() {
        // Calls at 0 and 1000; due from 0 to 2000: idle 100..1000 and 1100..2000.
        let samples = due(&[(0.0, true), (2000.0, true)]);
        let idle = idle_while_due(&[1000.0, 0.0], &samples, ALLOW);
        assert!((idle - 1.8).abs() < 1e-9, "{idle}");
        // Nothing due from 500 to 1500: idle 100..500 and 1500..2000.
        let samples = due(&[(0.0, true), (500.0, false), (1500.0, true), (2000.0, false)]);
        let idle = idle_while_due(&[0.0, 1000.0], &samples, ALLOW);
        assert!((idle - 0.9).abs() < 1e-9, "{idle}");
    }

    #[test]
    fn no_calls_at_all_is_idle_for_the_whole_due_span() {
        let samples = due(&[(0.0, false), (100.0, true), (350.0, true), (400.0, false)]);
        let idle = idle_while_due(&[], &samples, ALLOW);
        assert!((idle - 0.3).abs() < 1e-9, "{idle}");
        assert_eq!(idle_while_due(&[5.0], &[], ALLOW), 0.0);
    }
}

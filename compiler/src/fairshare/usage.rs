//! Time-based fairness: each queue's normalised historical usage `U`, from allocation samples.
//!
//! `U = Σ decayed allocation / Σ decayed capacity` over the samples inside the window, where a
//! sample `age` seconds old counts `0.5^(age / half-life)`. KAI reads the same figure from
//! Prometheus; we record samples ourselves, so it works with no extra service.

use std::collections::VecDeque;

use crate::model::{Fairness, PerResource};
use crate::quantity::ResourceKind;

/// One observation: when, the cluster's capacity, and what each queue had allocated.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    /// Seconds since an arbitrary epoch (the clock the scheduler is given).
    pub at: u64,
    /// Cluster capacity at that moment, in stored units.
    pub capacity: PerResource<i64>,
    /// Allocation per queue (indexed like `Policy::queues`), in stored units.
    pub allocated: Vec<PerResource<i64>>,
}

/// The samples of the last window, oldest first.
#[derive(Debug, Clone, Default)]
pub struct UsageHistory {
    samples: VecDeque<Sample>,
}

impl UsageHistory {
    /// An empty history.
    pub fn new() -> Self {
        Self::default()
    }

    /// Records a sample and forgets those older than the window. Samples must come in time order;
    /// one older than the newest is ignored (a clock that went backwards).
    pub fn record(&mut self, sample: Sample, fairness: &Fairness) {
        if self.samples.back().is_some_and(|last| sample.at < last.at) {
            return;
        }
        let now = sample.at;
        self.samples.push_back(sample);
        while self
            .samples
            .front()
            .is_some_and(|s| now.saturating_sub(s.at) > fairness.window.0)
        {
            self.samples.pop_front();
        }
    }

    /// How many samples are kept.
    pub fn len(&self) -> usize {
        self.samples.len()
    }

    /// Whether no sample is kept.
    pub fn is_empty(&self) -> bool {
        self.samples.is_empty()
    }

    /// Normalised usage per queue at time `now`, each in [0, 1]; 0 where nothing was recorded.
    pub fn usage(&self, queues: usize, now: u64, fairness: &Fairness) -> Vec<PerResource<f64>> {
        let mut allocated = vec![PerResource::<f64>::default(); queues];
        let mut capacity = PerResource::<f64>::default();
        let half_life = fairness.half_life.0.max(1) as f64;
        for s in &self.samples {
            let age = now.saturating_sub(s.at);
            if age > fairness.window.0 {
                continue;
            }
            let weight = 0.5f64.powf(age as f64 / half_life);
            for kind in ResourceKind::ALL {
                *capacity.get_mut(kind) += weight * *s.capacity.get(kind) as f64;
                for (q, a) in s.allocated.iter().enumerate().take(queues) {
                    *allocated[q].get_mut(kind) += weight * *a.get(kind) as f64;
                }
            }
        }
        for per in &mut allocated {
            for kind in ResourceKind::ALL {
                let total = *capacity.get(kind);
                let u = per.get_mut(kind);
                *u = if total > 0.0 {
                    (*u / total).clamp(0.0, 1.0)
                } else {
                    0.0
                };
            }
        }
        allocated
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::quantity::Duration;

    const DAY: u64 = 86_400;

    fn fairness() -> Fairness {
        Fairness {
            k: 1.0,
            window: Duration(7 * DAY),
            half_life: Duration(DAY),
        }
    }

    fn sample(at: u64, gpus_a: i64, gpus_b: i64) -> Sample {
        let per = |gpu| PerResource {
            gpu: gpu * 1000,
            cpu: 0,
            memory: 0,
        };
        Sample {
            at,
            capacity: per(10),
            allocated: vec![per(gpus_a), per(gpus_b)],
        }
    }

    #[test]
    fn steady_usage_is_the_share_of_capacity() {
        let mut h = UsageHistory::new();
        for hour in 0..48 {
            h.record(sample(hour * 3600, 3, 7), &fairness());
        }
        let u = h.usage(2, 47 * 3600, &fairness());
        assert!(
            (u[0].gpu - 0.3).abs() < 1e-9 && (u[1].gpu - 0.7).abs() < 1e-9,
            "{u:?}"
        );
        assert_eq!(u[0].cpu, 0.0, "no capacity recorded: no usage");
    }

    #[test]
    fn a_day_old_sample_counts_half_as_much_as_a_new_one() {
        let mut h = UsageHistory::new();
        h.record(sample(0, 10, 0), &fairness());
        h.record(sample(DAY, 0, 10), &fairness());
        let u = h.usage(2, DAY, &fairness());
        // a: 0.5·10 / (0.5·10 + 10) = 1/3; b: 10 / 15 = 2/3.
        assert!((u[0].gpu - 1.0 / 3.0).abs() < 1e-9, "{u:?}");
        assert!((u[1].gpu - 2.0 / 3.0).abs() < 1e-9, "{u:?}");
    }

    #[test]
    fn samples_leave_the_window_and_a_clock_going_back_is_ignored() {
        let mut h = UsageHistory::new();
        h.record(sample(0, 10, 0), &fairness());
        h.record(sample(8 * DAY, 0, 10), &fairness());
        assert_eq!(
            h.len(),
            1,
            "the first sample is older than the 7-day window"
        );
        h.record(sample(DAY, 10, 0), &fairness());
        assert_eq!(h.len(), 1);
        let u = h.usage(2, 8 * DAY, &fairness());
        assert_eq!((u[0].gpu, u[1].gpu), (0.0, 1.0));
    }
}

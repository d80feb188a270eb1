//! Time-based fairness: each queue's normalised historical usage `U`, from allocation samples.
//!
//! `U = Σ decayed allocation / Σ decayed capacity` over the samples inside the window, where a
//! sample `age` seconds old counts `0.5^(age / half-life)`. KAI reads the same figure from
//! Prometheus (`pkg/scheduler/cache/usagedb`); we record samples ourselves, so it works with no
//! extra service.
//!
//! Memory is bounded: samples are summed into at most [`BUCKETS`] buckets of `window / BUCKETS`
//! seconds (a sample per second over a week is still 64 buckets), each aged by the mean time of
//! its samples, so one sample per bucket is exact and more are averaged. Queues are keyed by
//! name, so a history survives a policy reload that adds, removes or reorders queues, and a
//! restart ([`UsageHistory::to_json`], [`UsageHistory::from_json`]).

use std::collections::{BTreeMap, VecDeque};

use serde::{Deserialize, Serialize};

use crate::model::{Fairness, PerResource};
use crate::quantity::ResourceKind;

/// Buckets kept over one window.
pub const BUCKETS: u64 = 64;

/// Version of the persisted history; a file of another version is not read.
const FORMAT: u32 = 1;

/// One observation: when, the cluster's capacity, and what each queue had allocated.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    /// Seconds since an arbitrary epoch (the clock the scheduler is given).
    pub at: u64,
    /// Cluster capacity at that moment, in stored units.
    pub capacity: PerResource<i64>,
    /// Allocation per queue name, in stored units (queues with nothing may be left out).
    pub allocated: Vec<(String, PerResource<i64>)>,
}

/// Sums of the samples of one stretch of time, amounts as `[gpu, cpu, memory]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Bucket {
    /// Time of its first sample (the bucket covers `first .. first + width`).
    first: u64,
    /// Time of its latest sample.
    last: u64,
    /// Sum of its samples' times, for their mean.
    sum_at: f64,
    /// Samples summed.
    samples: u64,
    capacity: [f64; 3],
    allocated: BTreeMap<String, [f64; 3]>,
}

/// The usage samples of the last window, summed into buckets, oldest first.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UsageHistory {
    format: u32,
    buckets: VecDeque<Bucket>,
}

impl Default for UsageHistory {
    fn default() -> Self {
        Self::new()
    }
}

fn amounts(p: &PerResource<i64>) -> [f64; 3] {
    ResourceKind::ALL.map(|k| *p.get(k) as f64)
}

fn add(into: &mut [f64; 3], from: [f64; 3]) {
    for (a, b) in into.iter_mut().zip(from) {
        *a += b;
    }
}

impl UsageHistory {
    /// An empty history.
    pub fn new() -> Self {
        UsageHistory {
            format: FORMAT,
            buckets: VecDeque::new(),
        }
    }

    /// Records a sample and forgets buckets whose latest sample left the window. Samples must
    /// come in time order; one older than the newest is ignored (a clock that went backwards).
    pub fn record(&mut self, sample: Sample, fairness: &Fairness) {
        if self.buckets.back().is_some_and(|b| sample.at < b.last) {
            return;
        }
        let width = (fairness.window.0 / BUCKETS).max(1);
        let now = sample.at;
        let fits = self
            .buckets
            .back()
            .is_some_and(|b| sample.at < b.first.saturating_add(width));
        if !fits {
            self.buckets.push_back(Bucket {
                first: now,
                last: now,
                sum_at: 0.0,
                samples: 0,
                capacity: [0.0; 3],
                allocated: BTreeMap::new(),
            });
        }
        if let Some(b) = self.buckets.back_mut() {
            b.last = now;
            b.sum_at += now as f64;
            b.samples += 1;
            add(&mut b.capacity, amounts(&sample.capacity));
            for (queue, a) in &sample.allocated {
                add(b.allocated.entry(queue.clone()).or_default(), amounts(a));
            }
        }
        while self
            .buckets
            .front()
            .is_some_and(|b| now.saturating_sub(b.last) > fairness.window.0)
        {
            self.buckets.pop_front();
        }
    }

    /// How many buckets are kept (at most [`BUCKETS`] + 1).
    pub fn len(&self) -> usize {
        self.buckets.len()
    }

    /// Whether nothing is recorded.
    pub fn is_empty(&self) -> bool {
        self.buckets.is_empty()
    }

    /// Normalised usage of each of `queues` (names) at time `now`, each in [0, 1]; 0 where
    /// nothing was recorded.
    pub fn usage(&self, queues: &[&str], now: u64, fairness: &Fairness) -> Vec<PerResource<f64>> {
        let mut allocated = vec![[0.0f64; 3]; queues.len()];
        let mut capacity = [0.0f64; 3];
        let half_life = fairness.half_life.0.max(1) as f64;
        for b in &self.buckets {
            let mean = b.sum_at / b.samples.max(1) as f64;
            let age = (now as f64 - mean).max(0.0);
            if age > fairness.window.0 as f64 {
                continue;
            }
            let weight = 0.5f64.powf(age / half_life);
            add(&mut capacity, b.capacity.map(|c| c * weight));
            for (q, name) in queues.iter().enumerate() {
                if let Some(a) = b.allocated.get(*name) {
                    add(&mut allocated[q], a.map(|a| a * weight));
                }
            }
        }
        allocated
            .into_iter()
            .map(|a| {
                let mut u = PerResource::<f64>::default();
                for (i, kind) in ResourceKind::ALL.into_iter().enumerate() {
                    *u.get_mut(kind) = if capacity[i] > 0.0 {
                        (a[i] / capacity[i]).clamp(0.0, 1.0)
                    } else {
                        0.0
                    };
                }
                u
            })
            .collect()
    }

    /// The history as JSON, to persist across restarts.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }

    /// A history persisted by [`UsageHistory::to_json`]; an error says why it cannot be read.
    pub fn from_json(text: &str) -> Result<Self, String> {
        let h: UsageHistory = serde_json::from_str(text).map_err(|e| e.to_string())?;
        if h.format != FORMAT {
            return Err(format!(
                "usage history format {} (this scheduler reads format {FORMAT})",
                h.format
            ));
        }
        Ok(h)
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
            allocated: vec![("a".into(), per(gpus_a)), ("b".into(), per(gpus_b))],
        }
    }

    #[test]
    fn steady_usage_is_the_share_of_capacity() {
        let mut h = UsageHistory::new();
        for hour in 0..48 {
            h.record(sample(hour * 3600, 3, 7), &fairness());
        }
        let u = h.usage(&["a", "b"], 47 * 3600, &fairness());
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
        let u = h.usage(&["a", "b"], DAY, &fairness());
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
        let u = h.usage(&["a", "b"], 8 * DAY, &fairness());
        assert_eq!((u[0].gpu, u[1].gpu), (0.0, 1.0));
    }

    #[test]
    fn a_sample_per_second_keeps_memory_bounded_and_the_same_usage() {
        let f = Fairness {
            k: 1.0,
            window: Duration(640),
            half_life: Duration(60),
        };
        let mut h = UsageHistory::new();
        for at in 0..5_000 {
            h.record(sample(at, 3, 7), &f);
        }
        assert!(h.len() <= BUCKETS as usize + 1, "{} buckets", h.len());
        let u = h.usage(&["a", "b"], 4_999, &f);
        assert!(
            (u[0].gpu - 0.3).abs() < 1e-9 && (u[1].gpu - 0.7).abs() < 1e-9,
            "{u:?}"
        );
    }

    #[test]
    fn usage_follows_queue_names_and_survives_a_restart() {
        let mut h = UsageHistory::new();
        h.record(sample(0, 4, 6), &fairness());
        let back = UsageHistory::from_json(&h.to_json()).unwrap();
        assert_eq!(back, h);
        // A reloaded policy that reorders queues, drops one and adds another.
        let u = back.usage(&["new", "b", "a"], 0, &fairness());
        assert_eq!((u[0].gpu, u[1].gpu, u[2].gpu), (0.0, 0.6, 0.4));
        let err = UsageHistory::from_json(&h.to_json().replace("\"format\":1", "\"format\":9"));
        assert!(err.unwrap_err().contains("format 9"));
        assert!(UsageHistory::from_json("{").is_err());
    }
}

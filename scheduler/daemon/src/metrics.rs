//! The daemon's Prometheus metrics: one `kai_` family set, encoded in the text format for
//! `/metrics`. The names are listed in the README; `update_cycle` sets them from one cycle.

use std::collections::HashMap;
use std::sync::atomic::AtomicU64;

use kai_policy_compiler::fairshare::FairShares;
use kai_policy_compiler::model::Policy;
use kai_policy_compiler::quantity::ResourceKind;
use kai_scheduler::cluster::{Amounts, Snapshot, Time};
use kai_scheduler::decision::{Decision, EvictReason};
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

type Labels = Vec<(&'static str, String)>;
type FloatGauge = Gauge<f64, AtomicU64>;

/// Every metric the daemon exports.
pub struct Metrics {
    registry: Registry,
    cycle_seconds: Family<Labels, Histogram, fn() -> Histogram>,
    decisions: Family<Labels, Counter>,
    evictions: Family<Labels, Counter>,
    reloads: Family<Labels, Counter>,
    pending_jobs: Family<Labels, Gauge>,
    pending_wait: Family<Labels, FloatGauge>,
    fair_share: Family<Labels, FloatGauge>,
    allocated: Family<Labels, FloatGauge>,
    quota: Family<Labels, FloatGauge>,
    limit: Family<Labels, FloatGauge>,
    policy_info: Family<Labels, Gauge>,
    api_calls: Family<Labels, Counter>,
}

fn cycle_histogram() -> Histogram {
    // 1 ms to about 16 s.
    Histogram::new(exponential_buckets(0.001, 2.0, 15))
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// Registers every family under the `kai_` prefix.
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix("kai");
        let m = Metrics {
            cycle_seconds: Family::new_with_constructor(cycle_histogram as fn() -> Histogram),
            decisions: Family::default(),
            evictions: Family::default(),
            reloads: Family::default(),
            pending_jobs: Family::default(),
            pending_wait: Family::default(),
            fair_share: Family::default(),
            allocated: Family::default(),
            quota: Family::default(),
            limit: Family::default(),
            policy_info: Family::default(),
            api_calls: Family::default(),
            registry: Registry::default(),
        };
        registry.register(
            "cycle_duration_seconds",
            "Wall time of scheduling cycles (`action=\"cycle\"`) and of each step in them (prepare, fair-share, allocate, consolidation, reclaim, preempt, stalegangeviction)",
            m.cycle_seconds.clone(),
        );
        registry.register(
            "decisions",
            "Decisions taken, by kind (bind, nominate, evict, pending)",
            m.decisions.clone(),
        );
        registry.register(
            "evictions",
            "Pods evicted, by reason (reclaim, preempt, consolidate, stale)",
            m.evictions.clone(),
        );
        registry.register(
            "policy_reloads",
            "Policy tips examined, by outcome (loaded, rejected, unreachable)",
            m.reloads.clone(),
        );
        registry.register(
            "pending_jobs",
            "Jobs pending after the last cycle, per queue",
            m.pending_jobs.clone(),
        );
        registry.register(
            "pending_wait_seconds",
            "Longest wait of a job pending after the last cycle, per queue",
            m.pending_wait.clone(),
        );
        registry.register(
            "queue_fair_share",
            "Fair share per queue and resource (GPUs, CPU cores, memory bytes)",
            m.fair_share.clone(),
        );
        registry.register(
            "queue_allocated",
            "Allocation after the last cycle per queue and resource (parents include children)",
            m.allocated.clone(),
        );
        registry.register(
            "queue_quota",
            "Quota per queue and resource of the active policy",
            m.quota.clone(),
        );
        registry.register(
            "queue_limit",
            "Limit per queue and resource of the active policy (absent: unlimited)",
            m.limit.clone(),
        );
        registry.register(
            "policy_info",
            "The active policy: 1 for its commit and digest",
            m.policy_info.clone(),
        );
        registry.register(
            "api_calls",
            "Kubernetes API calls the leader sent, by call (bind, evict, pod-condition, podgroup-status, podgroup-annotation, queue-status, event) and outcome (done, refused, gone, conflict, forbidden, failed, skipped)",
            m.api_calls.clone(),
        );
        // Every counter series exists from the start, at 0, so a rate over it is never missing.
        for (family, label, values) in [
            (
                &m.decisions,
                "kind",
                &["bind", "nominate", "evict", "pending"][..],
            ),
            (
                &m.evictions,
                "reason",
                &["reclaim", "preempt", "consolidate", "stale"][..],
            ),
            (
                &m.reloads,
                "outcome",
                &["loaded", "rejected", "unreachable"][..],
            ),
        ] {
            for v in values {
                let _ = family.get_or_create(&vec![(label, v.to_string())]);
            }
        }
        Metrics { registry, ..m }
    }

    /// The metrics in the Prometheus (OpenMetrics) text format.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        let _ = encode(&mut out, &self.registry);
        out
    }

    /// Counts one examined policy tip.
    pub fn reload(&self, outcome: &'static str) {
        self.reloads
            .get_or_create(&vec![("outcome", outcome.to_string())])
            .inc();
    }

    /// Records the active policy's commit and digest (the previous one's series is dropped).
    pub fn policy(&self, commit: &str, digest: &str) {
        self.policy_info.clear();
        self.policy_info
            .get_or_create(&vec![
                ("commit", commit.to_string()),
                ("digest", digest.to_string()),
            ])
            .set(1);
    }

    /// Counts the API calls a cycle's decisions became.
    pub fn calls(&self, calls: &[crate::backend::CallOutcome]) {
        for c in calls {
            self.api_calls
                .get_or_create(&vec![
                    ("call", c.call.to_string()),
                    ("outcome", c.outcome.to_string()),
                ])
                .inc();
        }
    }

    /// Records one cycle: its duration, decisions, and the per-queue figures after it.
    pub fn cycle(&self, seconds: f64, cycle: &CycleFigures<'_>) {
        self.cycle_seconds
            .get_or_create(&vec![("action", "cycle".to_string())])
            .observe(seconds);
        for &(action, seconds) in cycle.timings {
            self.cycle_seconds
                .get_or_create(&vec![("action", action.to_string())])
                .observe(seconds);
        }
        for d in cycle.decisions {
            let kind = match d {
                Decision::Bind { .. } => "bind",
                Decision::Nominate { .. } => "nominate",
                Decision::Evict { reason, .. } => {
                    let why = match reason {
                        EvictReason::Reclaim { .. } => "reclaim",
                        EvictReason::Preempt { .. } => "preempt",
                        EvictReason::Consolidate { .. } => "consolidate",
                        EvictReason::StaleGang { .. } => "stale",
                    };
                    self.evictions
                        .get_or_create(&vec![("reason", why.to_string())])
                        .inc();
                    "evict"
                }
                Decision::Pending { .. } => "pending",
            };
            self.decisions
                .get_or_create(&vec![("kind", kind.to_string())])
                .inc();
        }
        self.per_queue(cycle);
    }

    fn per_queue(&self, c: &CycleFigures<'_>) {
        for family in [&self.fair_share, &self.allocated, &self.quota, &self.limit] {
            family.clear();
        }
        self.pending_jobs.clear();
        self.pending_wait.clear();
        for (i, q) in c.policy.queues.iter().enumerate() {
            for kind in ResourceKind::ALL {
                let labels = vec![
                    ("queue", q.name.clone()),
                    ("resource", kind.name().to_string()),
                ];
                let unit = |v: i64| v as f64 / kind.scale() as f64;
                if let Some(share) = c.shares.queues.get(i) {
                    self.fair_share
                        .get_or_create(&labels)
                        .set(unit(share.get(kind).fair_share));
                }
                if let Some(a) = c.allocated.get(i) {
                    self.allocated
                        .get_or_create(&labels)
                        .set(unit(*a.get(kind)));
                }
                if let Some(r) = q.resources.get(kind) {
                    if let Some(v) = r.quota.finite() {
                        self.quota.get_or_create(&labels).set(unit(v));
                    }
                    if let Some(v) = r.limit.finite() {
                        self.limit.get_or_create(&labels).set(unit(v));
                    }
                }
            }
        }
        for (queue, (jobs, wait)) in pending_by_queue(c) {
            let labels = vec![("queue", queue)];
            self.pending_jobs.get_or_create(&labels).set(jobs);
            self.pending_wait.get_or_create(&labels).set(wait as f64);
        }
    }
}

/// What one cycle saw and decided, for the metrics.
pub struct CycleFigures<'a> {
    /// The policy it ran with.
    pub policy: &'a Policy,
    /// The snapshot it ran on.
    pub snapshot: &'a Snapshot,
    /// Its clock.
    pub now: Time,
    /// Its decisions.
    pub decisions: &'a [Decision],
    /// Its fair shares.
    pub shares: &'a FairShares,
    /// Allocation per queue after it.
    pub allocated: &'a [Amounts],
    /// Wall time of each of its steps (`CycleResult::timings`).
    pub timings: &'a [(&'static str, f64)],
}

/// Per queue: pending jobs and the longest wait among them (seconds since the oldest pod of
/// each job was created). A job's queue is its pods' queue label, else its namespace's default
/// queue, else `""`.
pub fn pending_by_queue(c: &CycleFigures<'_>) -> HashMap<String, (i64, Time)> {
    let pods: HashMap<String, &kai_scheduler::cluster::Pod> =
        c.snapshot.pods.iter().map(|p| (p.key(), p)).collect();
    let mut by_namespace: HashMap<&str, &str> = HashMap::new();
    for q in &c.policy.queues {
        for ns in &q.namespaces.defaults {
            by_namespace.insert(ns, &q.name);
        }
    }
    let mut out: HashMap<String, (i64, Time)> = HashMap::new();
    for d in c.decisions {
        let Decision::Pending { pods: keys, .. } = d else {
            continue;
        };
        let members: Vec<_> = keys.iter().filter_map(|k| pods.get(k)).collect();
        let Some(first) = members.first() else {
            continue;
        };
        let queue = first
            .queue
            .clone()
            .or_else(|| {
                by_namespace
                    .get(first.namespace.as_str())
                    .map(|q| q.to_string())
            })
            .unwrap_or_default();
        let created = members.iter().map(|p| p.created).min().unwrap_or(c.now);
        let entry = out.entry(queue).or_default();
        entry.0 += 1;
        entry.1 = entry.1.max(c.now.saturating_sub(created));
    }
    out
}

//! KAI's own queue-order test cases, transcribed from
//! `pkg/scheduler/plugins/proportion/queue_order/queue_order_test.go` (KAI Scheduler d5bc503a):
//! every case of `TestGetQueueOrderResult` and the two single-step tests. The numbers are KAI's
//! (GPU in devices); a KAI `ResourceShare{}` left empty is all zeros, max allowed included.

use std::cmp::Ordering;

use super::*;

/// Two queues compared as the cycle compares them: each keyed once, then the keys.
fn compare_queues(l: &Ranked, r: &Ranked, total: &Quantities) -> Ordering {
    compare_keys(&l.key(total), &r.key(total))
}

/// `lQueuePrioritized` / `rQueuePrioritized`.
const L: Ordering = Ordering::Less;
const R: Ordering = Ordering::Greater;

/// A KAI `ResourceShare{Deserved, FairShare, MaxAllowed, Allocated}` for GPU; CPU and memory
/// left empty, as in the KAI cases.
fn gpu(deserved: f64, fair_share: f64, max_allowed: f64, allocated: f64) -> QueueShares {
    PerResource {
        gpu: Share {
            deserved,
            fair_share,
            max_allowed,
            allocated,
            allocated_non_preemptible: 0.0,
        },
        ..PerResource::default()
    }
}

fn queue(shares: QueueShares, priority: i32, created: usize, job_gpus: f64) -> Ranked {
    Ranked {
        shares,
        priority,
        created,
        job: PerResource {
            gpu: job_gpus,
            ..PerResource::default()
        },
        victims: Quantities::default(),
    }
}

/// The same numbers for GPU, CPU and memory.
fn every_resource(s: Share) -> QueueShares {
    PerResource {
        gpu: s,
        cpu: s,
        memory: s,
    }
}

fn total(gpus: f64) -> Quantities {
    PerResource {
        gpu: gpus,
        ..PerResource::default()
    }
}

#[test]
fn kai_get_queue_order_result() {
    // (KAI test name, left queue, right queue, cluster GPUs, expected)
    let cases = [
        (
            "test prioritization based on fair share starvation",
            queue(gpu(2.0, 99.0, -1.0, 20.0), 0, 0, 0.0),
            queue(gpu(2.0, 2.0, -1.0, 0.0), 0, 1, 0.0),
            0.0,
            R,
        ),
        (
            "test prioritization based on quota starvation, even if priority is different",
            queue(gpu(2.0, 99.0, -1.0, 20.0), 1, 0, 0.0),
            queue(gpu(2.0, 2.0, -1.0, 0.0), 0, 1, 0.0),
            0.0,
            R,
        ),
        (
            "prioritize queue priority if queues are satisfied",
            queue(gpu(2.0, 99.0, -1.0, 20.0), 1, 0, 0.0),
            queue(gpu(2.0, 2.0, -1.0, 3.0), 0, 1, 0.0),
            0.0,
            L,
        ),
        (
            "prioritize queue priority if queues are satisfied, quota < rQueue < fairshare",
            queue(gpu(2.0, 99.0, -1.0, 20.0), 1, 0, 0.0),
            queue(gpu(2.0, 80.0, -1.0, 3.0), 0, 1, 0.0),
            0.0,
            L,
        ),
        // A 2-device job of 5,000 MiB each on nodes of 10,000 MiB devices asks for 1 GPU; the
        // other job, 10,000 MiB each, for 2 (KAI's GPU-memory requests count as fractions).
        (
            "GPU memory affects queue order - lower memory request prioritized",
            queue(gpu(50.0, 50.0, -1.0, 40.0), 0, 0, 2.0 * 5_000.0 / 10_000.0),
            queue(gpu(50.0, 50.0, -1.0, 40.0), 0, 1, 2.0 * 10_000.0 / 10_000.0),
            100.0,
            L,
        ),
        (
            "GPU memory affects queue order - higher memory request deprioritized",
            queue(gpu(50.0, 50.0, -1.0, 40.0), 0, 0, 4.0 * 8_000.0 / 10_000.0),
            queue(gpu(50.0, 50.0, -1.0, 40.0), 0, 1, 4.0 * 2_000.0 / 10_000.0),
            100.0,
            R,
        ),
    ];
    for (name, l, r, gpus, expected) in cases {
        assert_eq!(compare_queues(&l, &r, &total(gpus)), expected, "{name}");
        // The order is antisymmetric: swapped, the other side goes first.
        assert_eq!(
            compare_queues(&r, &l, &total(gpus)),
            expected.reverse(),
            "{name}, swapped"
        );
    }
}

/// `TestPrioritizeUnderUtilizedDoesNotAllocate`: a queue at its fair share goes before one
/// over it in every resource.
#[test]
fn kai_prioritize_under_utilized() {
    let all = |fair_share: f64, allocated: f64| {
        every_resource(Share {
            fair_share,
            allocated,
            ..Share::default()
        })
    };
    let (l, r) = (
        queue(all(1.0, 1.0), 0, 1, 0.0),
        queue(all(1.0, 2.0), 0, 0, 0.0),
    );
    assert_eq!(compare_queues(&l, &r, &total(0.0)), L);
}

/// `TestPrioritizeUnderQuotaWithJobDoesNotAllocate`: a queue within its quota goes before one
/// over it.
#[test]
fn kai_prioritize_under_quota_with_job() {
    let all = |deserved: f64, allocated: f64| {
        every_resource(Share {
            deserved,
            allocated,
            ..Share::default()
        })
    };
    let (l, r) = (
        queue(all(1.0, 0.0), 0, 1, 0.0),
        queue(all(1.0, 2.0), 0, 0, 0.0),
    );
    assert_eq!(compare_queues(&l, &r, &total(0.0)), L);
}

/// The review's Q4 example (kai-fidelity.md): the dominant share divides by the allocatable
/// share `max(deserved, fair share)`, not by the cluster. A (quota 2, fair 2) holds 1; B (quota
/// 8, fair 3) holds 2; each has a 1-GPU job; 10 GPUs: A = 2/2 = 1.0, B = 3/8 = 0.375, so B goes
/// first (dividing by the cluster would give A 0.2 against B 0.3).
#[test]
fn dominant_share_divides_by_the_allocatable_share() {
    let a = queue(gpu(2.0, 2.0, -1.0, 1.0), 0, 0, 1.0);
    let b = queue(gpu(8.0, 3.0, -1.0, 2.0), 0, 1, 1.0);
    assert_eq!(compare_queues(&a, &b, &total(10.0)), R);
}

/// The review's Q3 example: a queue with no allocatable share of a resource it would hold
/// (weight 0, quota 0, fair share 0) goes after one that has a share, before dominant shares
/// are compared.
#[test]
fn a_queue_without_allocatable_share_goes_last() {
    let a = queue(gpu(0.0, 0.0, -1.0, 0.0), 0, 0, 1.0);
    let b = queue(gpu(0.0, 5.0, -1.0, 4.0), 0, 1, 1.0);
    assert_eq!(compare_queues(&a, &b, &total(10.0)), R);
}

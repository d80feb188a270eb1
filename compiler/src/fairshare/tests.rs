use proptest::prelude::*;

use super::*;
use crate::check::check;
use crate::model::Policy;
use crate::source::{SourceFile, SourceSet};

fn policy(kdl: &str) -> Policy {
    let checked = check(
        &SourceSet::new(vec![SourceFile::new("p.kdl", kdl)]),
        Vec::new(),
    );
    checked
        .policy
        .unwrap_or_else(|| panic!("{:#?}", checked.diagnostics))
}

/// GPU demand per queue name, capacity in GPUs.
fn gpu_shares(
    p: &Policy,
    capacity: i64,
    demand: &[(&str, i64)],
    k: f64,
    usage: &[(&str, f64)],
) -> Vec<(String, Share)> {
    let mut d = Demand {
        k,
        ..Demand::default()
    };
    d.capacity.gpu = Some(capacity * 1000);
    d.request = vec![PerResource::default(); p.queues.len()];
    d.usage = vec![PerResource::default(); p.queues.len()];
    for (name, gpus) in demand {
        let i = p.queues.iter().position(|q| q.name == *name).unwrap();
        d.request[i].gpu = gpus * 1000;
    }
    for (name, u) in usage {
        let i = p.queues.iter().position(|q| q.name == *name).unwrap();
        d.usage[i].gpu = *u;
    }
    let shares = compute(p, &d);
    p.queues
        .iter()
        .zip(shares.queues)
        .map(|(q, s)| (q.name.clone(), s.gpu))
        .collect()
}

fn gpus(shares: &[(String, Share)], name: &str) -> f64 {
    shares.iter().find(|(n, _)| n == name).unwrap().1.fair_share as f64 / 1000.0
}

const OPEN: &str = "namespaces \"*\"";

#[test]
fn quota_first_then_the_rest_by_weight() {
    let p = policy(&format!(
        "queue \"llm\" {{ gpu quota=24 weight=1; {OPEN} }}
         queue \"vision\" {{ gpu quota=16 weight=2; {OPEN} }}
         queue \"infra\" {{ gpu quota=0 weight=0; {OPEN} }}"
    ));
    let s = gpu_shares(
        &p,
        58,
        &[("llm", 30), ("vision", 100), ("infra", 5)],
        0.0,
        &[],
    );
    // 18 GPUs are left after quotas; llm is offered 6 (weight 1 of 3) and wants exactly 6.
    let llm = &s[0].1;
    assert_eq!(
        (llm.deserved, llm.over_quota(), llm.bucket_available),
        (24_000, 6_000, 18_000)
    );
    assert_eq!(llm.cap, Cap::Request);
    assert_eq!(gpus(&s, "vision"), 28.0, "16 quota + 12 over quota");
    assert_eq!(gpus(&s, "infra"), 0.0);
    assert_eq!(s[2].1.cap, Cap::ZeroWeight);
}

#[test]
fn a_higher_priority_bucket_takes_everything_before_a_lower_one() {
    let p = policy(&format!(
        "queue \"prod\" priority=200 {{ gpu quota=2; {OPEN} }}
         queue \"batch\" priority=100 {{ gpu quota=2 weight=10; {OPEN} }}"
    ));
    let s = gpu_shares(&p, 10, &[("prod", 20), ("batch", 20)], 0.0, &[]);
    assert_eq!((gpus(&s, "prod"), gpus(&s, "batch")), (8.0, 2.0));
    assert_eq!(s[1].1.cap, Cap::Exhausted);
}

#[test]
fn leftover_units_go_to_the_largest_fraction_then_the_earlier_queue() {
    let p = policy(&format!(
        "queue \"a\" {{ gpu quota=0; {OPEN} }}; queue \"b\" {{ gpu quota=0; {OPEN} }}; queue \"c\" {{ gpu quota=0 weight=2; {OPEN} }}"
    ));
    // 10 GPUs by weights 1:1:2 → offers 2.5, 2.5, 5: floors 2, 2, 5, and the last unit to `a`
    // (tied fraction with `b`, declared first).
    let s = gpu_shares(&p, 10, &[("a", 10), ("b", 10), ("c", 10)], 0.0, &[]);
    assert_eq!(
        (gpus(&s, "a"), gpus(&s, "b"), gpus(&s, "c")),
        (3.0, 2.0, 5.0)
    );
    assert_eq!(s[0].1.leftover, 1000);
}

#[test]
fn over_subscribed_quotas_are_kept_and_leave_nothing_over_quota() {
    let p = policy(&format!(
        "cluster \"c\" {{ oversubscription \"allow\" }}
         queue \"a\" {{ gpu quota=8; {OPEN} }}; queue \"b\" {{ gpu quota=8; {OPEN} }}"
    ));
    let s = gpu_shares(&p, 10, &[("a", 20), ("b", 20)], 0.0, &[]);
    assert_eq!((gpus(&s, "a"), gpus(&s, "b")), (8.0, 8.0));
    assert_eq!(s[0].1.bucket_available, 0);
}

#[test]
fn children_divide_their_parents_share_and_limits_cap_everyone() {
    let p = policy(
        "queue \"research\" { gpu quota=40 limit=60 weight=2
             queue \"llm\" { gpu quota=24 limit=30; namespaces \"llm\" }
             queue \"vision\" { gpu quota=16; namespaces \"vision\" } }
         queue \"ds\" { gpu quota=35; queue \"analytics\" { gpu quota=24.5; namespaces \"a\" }
             queue \"inference\" { gpu quota=10.5; namespaces \"i\" } }",
    );
    let s = gpu_shares(
        &p,
        100,
        &[
            ("llm", 100),
            ("vision", 100),
            ("analytics", 100),
            ("inference", 5),
        ],
        0.0,
        &[],
    );
    // Top level: 75 deserved, 25 left by weights 2:1 → 16 and 8 whole GPUs, the last one to
    // research's larger fraction (0.67 against 0.33).
    assert_eq!((gpus(&s, "research"), gpus(&s, "ds")), (57.0, 43.0));
    // research's 57: quotas 24 + 16, then 8.5 each offered: llm's remaining 6 fits (its limit is 30).
    assert_eq!(gpus(&s, "llm"), 30.0);
    assert_eq!(
        s.iter().find(|(n, _)| n == "llm").unwrap().1.cap,
        Cap::Limit
    );
    assert_eq!(gpus(&s, "vision"), 27.0);
    // ds's 43: inference deserves only its request of 5, analytics takes the 13 whole GPUs of
    // the 13.5 left and remembers 0.5. This test expected 37.5 (the half GPU undivided) until
    // the engine followed KAI's `divideRemainingResource`, which hands the last half GPU
    // (`min(1, remaining)`) to the queue with the largest remainder: 24.5 + 13 + 0.5.
    assert_eq!(gpus(&s, "inference"), 5.0);
    assert_eq!(
        s.iter()
            .find(|(n, _)| n == "inference")
            .unwrap()
            .1
            .deserved_by,
        DeservedBy::Request
    );
    assert_eq!(gpus(&s, "analytics"), 38.0);
}

#[test]
fn heavy_past_usage_pulls_a_share_down() {
    let p = policy(&format!(
        "queue \"a\" {{ gpu quota=0; {OPEN} }}; queue \"b\" {{ gpu quota=0; {OPEN} }}"
    ));
    let fair = gpu_shares(&p, 10, &[("a", 10), ("b", 10)], 1.0, &[]);
    assert_eq!((gpus(&fair, "a"), gpus(&fair, "b")), (5.0, 5.0));
    // a used 90% of the cluster lately: P = max(0, 0.5 + (0.5 − 0.9)) = 0.1 against b's 1.0.
    let s = gpu_shares(&p, 10, &[("a", 10), ("b", 10)], 1.0, &[("a", 0.9)]);
    assert!(gpus(&s, "a") < gpus(&s, "b"));
    assert_eq!(gpus(&s, "a") + gpus(&s, "b"), 10.0);
}

#[test]
fn an_unlimited_quota_deserves_the_whole_total_and_ungoverned_resources_follow_requests() {
    let p = policy(&format!(
        "queue \"a\" {{ gpu quota=#inf; {OPEN} }}; queue \"b\" {{ {OPEN} }}"
    ));
    let s = gpu_shares(&p, 10, &[("a", 7), ("b", 2)], 0.0, &[]);
    assert_eq!((gpus(&s, "a"), gpus(&s, "b")), (7.0, 2.0));
    assert_eq!(s[0].1.deserved_by, DeservedBy::Request);
}

/// A flat sibling set with random terms, written as KDL in a given order.
#[derive(Debug, Clone)]
struct Q {
    name: String,
    quota: i64,
    limit: Option<i64>,
    weight: u32,
    priority: i32,
    /// In milli-GPUs, a multiple of half a GPU (so remainders and fractional leftovers occur).
    request: i64,
}

fn flat_policy(queues: &[Q]) -> String {
    let mut text = String::from("cluster \"c\" { oversubscription \"allow\" }\n");
    for q in queues {
        let limit = q.limit.map(|l| format!(" limit={l}")).unwrap_or_default();
        text.push_str(&format!(
            "queue \"{}\" priority={} {{ gpu quota={}{limit} weight={}; namespaces \"*\" }}\n",
            q.name, q.priority, q.quota, q.weight
        ));
    }
    text
}

fn arb_queues() -> impl Strategy<Value = Vec<Q>> {
    prop::collection::vec(
        (
            0i64..20,
            prop::option::of(0i64..40),
            0u32..5,
            0i32..3,
            0i64..100,
        ),
        1..8,
    )
    .prop_map(|v| {
        v.into_iter()
            .enumerate()
            .map(|(i, (quota, limit, weight, priority, request))| Q {
                name: format!("q{i}"),
                quota,
                limit: limit.map(|l| l.max(quota)),
                weight,
                priority: priority * 100,
                request: request * 500,
            })
            .collect()
    })
}

fn run(queues: &[Q], capacity: i64, k: f64) -> Vec<(String, Share)> {
    let p = policy(&flat_policy(queues));
    let mut d = Demand {
        k,
        ..Demand::default()
    };
    d.capacity.gpu = Some(capacity * 1000);
    d.request = vec![PerResource::default(); p.queues.len()];
    d.usage = vec![PerResource::default(); p.queues.len()];
    for q in queues {
        let i = p.queues.iter().position(|x| x.name == q.name).unwrap();
        d.request[i].gpu = q.request;
    }
    let mut s: Vec<(String, Share)> = p
        .queues
        .iter()
        .zip(compute(&p, &d).queues)
        .map(|(q, s)| (q.name.clone(), s.gpu))
        .collect();
    s.sort_by(|a, b| a.0.cmp(&b.0));
    s
}

/// `PROPTEST_CASES` sets how many cases each property runs (CI keeps the fast default).
fn config() -> ProptestConfig {
    ProptestConfig {
        cases: std::env::var("PROPTEST_CASES")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(128),
        ..ProptestConfig::default()
    }
}

proptest! {
    #![proptest_config(config())]

    /// The rounds never pass a queue's limit or request; only KAI's leftover pass may, by less
    /// than the one unit it gives (`divideRemainingResource` does not check the request).
    #[test]
    fn only_the_one_leftover_unit_can_pass_a_limit_or_request(queues in arb_queues(), capacity in 0i64..200) {
        for (name, s) in run(&queues, capacity, 0.0) {
            let q = queues.iter().find(|q| q.name == name).unwrap();
            let requestable = q.limit.map_or(q.request, |l| q.request.min(l * 1000));
            prop_assert!(s.leftover <= 1000, "{name}: {s:?}");
            prop_assert!(s.fair_share - s.leftover <= requestable, "{name}: {s:?}");
            if s.fair_share > requestable {
                prop_assert!(s.fair_share - requestable < 1000, "{name}: {s:?}");
            }
        }
    }

    #[test]
    fn a_level_never_hands_out_more_than_it_has_unless_quotas_are_over_subscribed(queues in arb_queues(), capacity in 0i64..200) {
        let shares = run(&queues, capacity, 0.0);
        let total: i64 = shares.iter().map(|(_, s)| s.fair_share).sum();
        let deserved: i64 = shares.iter().map(|(_, s)| s.deserved).sum();
        prop_assert!(total <= (capacity * 1000).max(deserved));
        for (_, s) in &shares {
            prop_assert_eq!(s.undivided, (capacity * 1000 - total).max(0));
        }
    }

    /// KAI's rounds are not monotone to the unit: with more weight a queue can take the whole
    /// units of a bigger offer, stop the rounds earlier and lose a leftover tie it used to win
    /// (16.5 GPUs for a bucket of two, one wanting 3 and one 15, and 1 more wanted below: the
    /// second gets 13.5 at weights 1:1 but 13 at 1:5). What holds is that it never loses a
    /// whole unit.
    #[test]
    fn with_k_zero_more_weight_never_costs_a_whole_unit(queues in arb_queues(), capacity in 0i64..200, pick in 0usize..8, extra in 1u32..5) {
        let pick = pick % queues.len();
        let before = run(&queues, capacity, 0.0);
        let mut heavier = queues.clone();
        heavier[pick].weight += extra;
        let after = run(&heavier, capacity, 0.0);
        let name = &queues[pick].name;
        let get = |s: &[(String, Share)]| s.iter().find(|(n, _)| n == name).unwrap().1.fair_share;
        prop_assert!(get(&after) > get(&before) - 1000, "{name}: {} → {}", get(&before), get(&after));
    }

    #[test]
    fn declaration_order_does_not_matter_when_nothing_is_tied(queues in arb_queues(), capacity in 0i64..200, seed in any::<u64>()) {
        let shares = run(&queues, capacity, 0.0);
        // Ties (equal fractions competing for a leftover unit) are broken by declaration order
        // on purpose, so only untied cases must agree.
        let mut fractions: Vec<(i32, i64)> = shares
            .iter()
            .filter(|(_, s)| s.fraction > 0.0)
            .map(|(n, s)| (queues.iter().find(|q| &q.name == n).unwrap().priority, (s.fraction * 1e9).round() as i64))
            .collect();
        let before = fractions.len();
        fractions.sort_unstable();
        fractions.dedup();
        prop_assume!(fractions.len() == before);
        let mut shuffled = queues.clone();
        let mut state = seed;
        for i in (1..shuffled.len()).rev() {
            state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            shuffled.swap(i, (state >> 33) as usize % (i + 1));
        }
        let again = run(&shuffled, capacity, 0.0);
        let amounts = |s: &[(String, Share)]| s.iter().map(|(n, s)| (n.clone(), s.fair_share)).collect::<Vec<_>>();
        prop_assert_eq!(amounts(&shares), amounts(&again));
    }
}

#[test]
fn when_every_pull_is_zero_the_rest_stays_undivided_and_says_so() {
    let p = policy(&format!(
        "queue \"a\" {{ gpu quota=0; {OPEN} }}; queue \"b\" {{ gpu quota=0; {OPEN} }}"
    ));
    // Both used the whole cluster lately: P = max(0, 0.5 + (0.5 − 1)) = 0 each, so KAI's
    // `divideUpToFairShare` stops before its first round (shareWeightsSum == 0).
    let s = gpu_shares(
        &p,
        10,
        &[("a", 10), ("b", 10)],
        1.0,
        &[("a", 1.0), ("b", 1.0)],
    );
    for (_, share) in &s {
        assert_eq!((share.fair_share, share.undivided), (0, 10_000));
        assert_eq!(share.cap, Cap::Stopped);
    }
}

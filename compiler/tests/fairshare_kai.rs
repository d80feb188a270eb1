//! KAI Scheduler's own fair-share test cases, run through our engine: every case in
//! `tests/fairshare_kai/*.yaml` names the KAI test it was transcribed from and carries KAI's
//! expected numbers (format in `tests/fairshare_kai/README.md`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use kai_policy_compiler::fairshare::{self, Demand};
use kai_policy_compiler::model::{
    Bound, Cluster, MinRuntime, Namespaces, Origin, PerResource, Policy, Queue, ResourcePolicy,
};
use kai_policy_compiler::quantity::ResourceKind;
use serde::Deserialize;

/// One file of cases, transcribed from one KAI test file (or the review).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct CaseFile {
    /// Where the cases come from.
    source: String,
    cases: Vec<Case>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Case {
    /// The KAI test's Describe / Context / It path.
    name: String,
    /// Why the case reads as it does, where the transcription had to choose.
    #[serde(default)]
    note: Option<String>,
    /// Why the case cannot be expressed (then it has nothing else).
    #[serde(default)]
    cannot: Option<String>,
    /// KAI's `kValue`.
    #[serde(default)]
    k: f64,
    /// What the top level divides, per resource, in KAI's units.
    #[serde(default)]
    total: BTreeMap<String, f64>,
    /// What KAI's `setResourceShare` returns: what the top level leaves undivided.
    #[serde(default)]
    remaining: BTreeMap<String, f64>,
    /// Parents before their children; siblings in creation order.
    #[serde(default)]
    queues: Vec<CaseQueue>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct CaseQueue {
    name: String,
    #[serde(default)]
    parent: Option<String>,
    #[serde(default)]
    priority: i32,
    #[serde(default)]
    gpu: Option<Terms>,
    #[serde(default)]
    cpu: Option<Terms>,
    #[serde(default)]
    memory: Option<Terms>,
}

/// KAI's `ResourceShare` fields that the division reads, and the expected `FairShare`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Terms {
    quota: f64,
    limit: f64,
    weight: f64,
    #[serde(default)]
    request: f64,
    #[serde(default)]
    usage: f64,
    #[serde(default)]
    fair_share: Option<f64>,
}

impl CaseQueue {
    fn terms(&self, kind: ResourceKind) -> Option<&Terms> {
        match kind {
            ResourceKind::Gpu => self.gpu.as_ref(),
            ResourceKind::Cpu => self.cpu.as_ref(),
            ResourceKind::Memory => self.memory.as_ref(),
        }
    }
}

/// KAI's units to our stored units: GPU devices to thousandths; millicores and bytes stay.
fn stored(v: f64, kind: ResourceKind) -> i64 {
    let scale = match kind {
        ResourceKind::Gpu => 1000.0,
        ResourceKind::Cpu | ResourceKind::Memory => 1.0,
    };
    (v * scale).round() as i64
}

/// KAI's -1 is unlimited.
fn bound(v: f64, kind: ResourceKind) -> Bound {
    if v == -1.0 {
        Bound::Unlimited
    } else {
        Bound::Finite(stored(v, kind))
    }
}

fn kind_named(name: &str) -> Result<ResourceKind, String> {
    ResourceKind::ALL
        .into_iter()
        .find(|k| k.name() == name)
        .ok_or_else(|| format!("unknown resource \"{name}\" (gpu, cpu or memory)"))
}

/// The case as a checked policy and the engine's demand.
fn build(case: &Case) -> Result<(Policy, Demand), String> {
    let mut queues: Vec<Queue> = Vec::new();
    for (i, cq) in case.queues.iter().enumerate() {
        let parent = match &cq.parent {
            None => None,
            Some(p) => Some(queues.iter().position(|q| &q.name == p).ok_or_else(|| {
                format!("queue {}: parent {p} is not declared before it", cq.name)
            })?),
        };
        let depth = parent.map_or(0, |p| queues[p].depth + 1);
        if let Some(p) = parent {
            queues[p].children.push(i);
        }
        let policy_for = |kind| {
            cq.terms(kind).map(|t| ResourcePolicy {
                quota: bound(t.quota, kind),
                limit: bound(t.limit, kind),
                weight: t.weight,
            })
        };
        queues.push(Queue {
            name: cq.name.clone(),
            display_name: None,
            priority: cq.priority,
            parent,
            children: Vec::new(),
            depth,
            resources: PerResource {
                gpu: policy_for(ResourceKind::Gpu),
                cpu: policy_for(ResourceKind::Cpu),
                memory: policy_for(ResourceKind::Memory),
            },
            namespaces: Namespaces::default(),
            default_priority_class: None,
            placement: None,
            min_runtime: MinRuntime::default(),
            origin: Origin {
                file: "case".to_string(),
                line: i + 1,
            },
            labels: BTreeMap::new(),
            annotations: BTreeMap::new(),
        });
    }
    let mut demand = Demand {
        k: case.k,
        request: vec![PerResource::default(); queues.len()],
        usage: vec![PerResource::default(); queues.len()],
        ..Demand::default()
    };
    for (name, total) in &case.total {
        let kind = kind_named(name)?;
        *demand.capacity.get_mut(kind) = Some(stored(*total, kind));
    }
    for (i, cq) in case.queues.iter().enumerate() {
        for kind in ResourceKind::ALL {
            if let Some(t) = cq.terms(kind) {
                *demand.request[i].get_mut(kind) = stored(t.request, kind);
                *demand.usage[i].get_mut(kind) = t.usage;
            }
        }
    }
    let policy = Policy {
        cluster: Cluster::default(),
        priority_classes: Vec::new(),
        placements: Vec::new(),
        queues,
    };
    Ok((policy, demand))
}

/// Every way the engine's result differs from KAI's expectations for one case.
fn mismatches(case: &Case) -> Result<Vec<String>, String> {
    let (policy, demand) = build(case)?;
    let shares = fairshare::compute(&policy, &demand);
    let mut wrong = Vec::new();
    for (i, cq) in case.queues.iter().enumerate() {
        for kind in ResourceKind::ALL {
            let Some(expected) = cq.terms(kind).and_then(|t| t.fair_share) else {
                continue;
            };
            let got = shares.queues[i].get(kind).fair_share;
            if got != stored(expected, kind) {
                wrong.push(format!(
                    "{} {}: KAI {} (stored {}), ours {got}",
                    cq.name,
                    kind.name(),
                    expected,
                    stored(expected, kind)
                ));
            }
        }
    }
    let root = policy.queues.iter().position(|q| q.parent.is_none());
    for (name, expected) in &case.remaining {
        let kind = kind_named(name)?;
        let got = root.map_or(0, |r| shares.queues[r].get(kind).undivided);
        if got != stored(*expected, kind) {
            wrong.push(format!("remaining {name}: KAI {expected}, ours {got}"));
        }
    }
    Ok(wrong)
}

fn case_files() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fairshare_kai");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .collect();
    files.sort();
    files
}

#[test]
fn the_engine_gives_kais_numbers_in_kais_own_test_cases() {
    let mut failures = Vec::new();
    let (mut ran, mut cannot) = (0, 0);
    for path in case_files() {
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path:?}: {e}"));
        let file: CaseFile =
            serde_saphyr::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        assert!(
            !file.source.is_empty(),
            "{}: source is empty",
            path.display()
        );
        for case in &file.cases {
            let at = format!("{}: {}", path.display(), case.name);
            if let Some(why) = &case.cannot {
                assert!(
                    case.queues.is_empty() && !why.trim().is_empty(),
                    "{at}: a case that cannot be expressed says why and has no queues"
                );
                cannot += 1;
                continue;
            }
            assert!(!case.queues.is_empty(), "{at}: no queues");
            ran += 1;
            let note = case
                .note
                .as_ref()
                .map(|n| format!("\n    note: {n}"))
                .unwrap_or_default();
            match mismatches(case) {
                Ok(wrong) if wrong.is_empty() => {}
                Ok(wrong) => failures.push(format!("{at}{note}\n    {}", wrong.join("\n    "))),
                Err(e) => failures.push(format!("{at}: {e}")),
            }
        }
    }
    assert!(ran > 0, "no cases found");
    assert!(
        failures.is_empty(),
        "{} of {ran} cases differ from KAI ({cannot} not expressible):\n{}",
        failures.len(),
        failures.join("\n")
    );
}

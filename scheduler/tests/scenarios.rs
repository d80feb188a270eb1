//! The scenario suite: every folder under `tests/scenarios/` is a small cluster and policy, run
//! through `kai-scheduler simulate` in memory, with reviewed snapshots beside it of what the
//! simulation prints (`human.snap`) and its JSON (`json.snap`).
//!
//! A scenario folder holds:
//! - `policy.kdl` or a `policy/` folder: the policy;
//! - `cluster.yaml`: the cluster, as `kubectl get nodes,pods,podgroups.scheduling.run.ai -A -o
//!   yaml` prints it; its leading comment says what the scenario shows;
//! - `cycles` (optional): how many cycles at most (default: the simulator's);
//! - `expect`: what the issue says must happen, one line per fact, checked against the final
//!   state and the decisions (`#` starts a comment):
//!   - `bound NS/POD [NODE]`, `pending NS/POD`, `evicted NS/POD`, `nominated NS/POD NODE`;
//!   - `reason NS/POD TEXT…`: the pod's last pending reason contains TEXT;
//!   - `evicted-by NS/POD TEXT…`: the eviction's reason contains TEXT;
//!   - `never-evicted NS/POD`: no cycle evicts it;
//!   - `bound-count PREFIX N`, `evicted-count PREFIX N`: exactly N pods whose `NS/NAME` starts
//!     with PREFIX end bound (evicted);
//!   - `at-most-per-node PREFIX N`: no node runs more than N GPUs of those pods;
//!   - `one-domain PREFIX LABEL`: those pods run on nodes with one value of the node label;
//!   - `in-cycle N pending NS/POD TEXT…`: in cycle N (from 1) the pod is pending with a reason
//!     that contains TEXT; `in-cycle N evicts NS/POD` and `in-cycle N binds NS/POD`: cycle N
//!     evicts (binds) the pod, and no earlier cycle did; `in-cycle N at SECONDS`: cycle N runs
//!     that many seconds after the first.
//!
//! - `gap` (optional): the scheduler does not do this yet, and why. Its unmet expectations are
//!   listed but do not fail the suite; once they are all met, the suite fails until `gap` is
//!   deleted, so a fixed behaviour is locked in.
//!
//! To accept changed output: `INSTA_UPDATE=always cargo test -p kai-scheduler --test scenarios`,
//! then review the diff of the `.snap` files.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};

use kai_policy_compiler::check::check;
use kai_policy_compiler::diagnostics::{HumanStyle, render_human};
use kai_policy_compiler::model::Policy;
use kai_policy_compiler::source::load_dir;
use kai_scheduler::decision::Decision;
use kai_scheduler::ingest::{Note, Options, read_cluster};
use kai_scheduler::simulate::{self, Simulation, Status};

const SCENARIOS: &str = "tests/scenarios";

/// One scenario, simulated.
struct Scenario {
    name: String,
    dir: PathBuf,
    policy: Policy,
    sim: Simulation,
    notes: Vec<Note>,
}

fn scenario_names() -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(SCENARIOS)
        .expect("tests/scenarios exists (cargo runs integration tests from the crate folder)")
        .map(|entry| entry.expect("readable scenario folder"))
        .filter(|entry| entry.file_type().is_ok_and(|t| t.is_dir()))
        .map(|entry| entry.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert!(!names.is_empty(), "no scenarios under {SCENARIOS}");
    names
}

fn load(name: &str) -> Scenario {
    let dir = Path::new(SCENARIOS).join(name);
    let policy_path = if dir.join("policy").is_dir() {
        dir.join("policy")
    } else {
        dir.join("policy.kdl")
    };
    let (sources, early) = load_dir(&policy_path)
        .unwrap_or_else(|e| panic!("scenario {name}: policy cannot be loaded: {e}"));
    let checked = check(&sources, early);
    let policy = match checked.policy {
        Some(p) if !checked.has_errors() => p,
        _ => panic!(
            "scenario {name}: the policy has errors:\n{}",
            render_human(&checked.diagnostics, &sources, HumanStyle::Plain)
        ),
    };
    let file = read_cluster(&dir.join("cluster.yaml"), &Options::for_policy(&policy))
        .unwrap_or_else(|e| panic!("scenario {name}: {e}"));
    let cycles = match std::fs::read_to_string(dir.join("cycles")) {
        Ok(text) => text
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("scenario {name}: `cycles` is not a number")),
        Err(_) => simulate::Options::default().cycles,
    };
    let options = simulate::Options {
        cycles,
        start: file.taken,
        ..simulate::Options::default()
    };
    let sim = simulate::simulate(file.snapshot, &policy, &options);
    Scenario {
        name: name.to_string(),
        dir,
        policy,
        sim,
        notes: file.notes,
    }
}

impl Scenario {
    fn human(&self) -> String {
        let mut out = String::new();
        for note in &self.notes {
            out.push_str(&format!("note: {}\n", note.in_file("cluster.yaml")));
        }
        out.push_str(&simulate::render_human(&self.sim, &self.policy));
        out
    }

    /// Every expectation that does not hold, in the words of the `expect` file.
    fn unmet(&self) -> Vec<String> {
        let path = self.dir.join("expect");
        let text = std::fs::read_to_string(&path)
            .unwrap_or_else(|_| panic!("scenario {} has no `expect` file", self.name));
        let mut unmet = Vec::new();
        for line in text.lines() {
            let line = line.split('#').next().unwrap_or("").trim();
            if line.is_empty() {
                continue;
            }
            let words: Vec<&str> = line.split_whitespace().collect();
            if words[0] == "in-cycle" {
                if !self.holds_in_cycle(&words[1..]) {
                    unmet.push(line.to_string());
                }
                continue;
            }
            let (verb, pod, rest) = (words[0], words.get(1).copied().unwrap_or(""), &words[2..]);
            let state = self.sim.pods.get(pod);
            let ok = match verb {
                "bound" => state.is_some_and(|s| {
                    s.status == Status::Bound
                        && rest.first().is_none_or(|n| s.node.as_deref() == Some(*n))
                }),
                "pending" => state.is_some_and(|s| s.status == Status::Pending),
                "evicted" => state.is_some_and(|s| s.status == Status::Evicted),
                "nominated" => state.is_some_and(|s| {
                    s.status == Status::Pending
                        && rest
                            .first()
                            .is_none_or(|n| s.nominated.as_deref() == Some(*n))
                }),
                "reason" => self
                    .last_pending_reason(pod)
                    .is_some_and(|r| r.contains(&rest.join(" "))),
                "evicted-by" => self
                    .eviction_reasons(pod)
                    .any(|r| r.contains(&rest.join(" "))),
                "never-evicted" => self.eviction_reasons(pod).next().is_none(),
                "bound-count" | "evicted-count" => {
                    let want = if verb == "bound-count" {
                        Status::Bound
                    } else {
                        Status::Evicted
                    };
                    let n = self
                        .sim
                        .pods
                        .iter()
                        .filter(|(k, s)| k.starts_with(pod) && s.status == want)
                        .count();
                    rest.first().and_then(|r| r.parse().ok()) == Some(n)
                }
                "at-most-per-node" => {
                    let max: i64 = rest[0].parse().expect("a number");
                    let mut per_node = std::collections::BTreeMap::<&str, i64>::new();
                    for p in self.bound_with_prefix(pod) {
                        *per_node.entry(p.node.as_deref().unwrap_or("")).or_default() +=
                            p.request.gpu;
                    }
                    per_node.values().all(|&g| g <= max * 1000)
                }
                "one-domain" => {
                    let label = rest[0];
                    let values: std::collections::BTreeSet<Option<&String>> = self
                        .bound_with_prefix(pod)
                        .filter_map(|p| {
                            let node = p.node.as_deref()?;
                            let n = self.sim.snapshot.nodes.iter().find(|n| n.name == node)?;
                            Some(n.labels.get(label))
                        })
                        .collect();
                    values.len() == 1 && !values.contains(&None)
                }
                other => panic!("scenario {}: unknown expectation `{other}`", self.name),
            };
            if !ok {
                unmet.push(line.to_string());
            }
        }
        unmet
    }

    /// An `in-cycle N VERB …` expectation: what cycle N (counted from 1) decided.
    fn holds_in_cycle(&self, words: &[&str]) -> bool {
        let n: usize = words[0].parse().expect("`in-cycle` takes a cycle number");
        let (verb, what, rest) = (words[1], words.get(2).copied().unwrap_or(""), &words[3..]);
        let Some(cycle) = n.checked_sub(1).and_then(|i| self.sim.cycles.get(i)) else {
            return false;
        };
        let first = self.sim.cycles[0].at;
        let decided = |c: &kai_scheduler::simulate::CycleRecord, evict: bool| {
            c.decisions.iter().any(|d| match d {
                Decision::Evict { pod, .. } => evict && pod == what,
                Decision::Bind { pod, .. } => !evict && pod == what,
                _ => false,
            })
        };
        match verb {
            "pending" => cycle.decisions.iter().any(|d| match d {
                Decision::Pending { pods, reason, .. } => {
                    pods.iter().any(|p| p == what) && reason.to_string().contains(&rest.join(" "))
                }
                _ => false,
            }),
            "evicts" | "binds" => {
                let evict = verb == "evicts";
                decided(cycle, evict) && !self.sim.cycles[..n - 1].iter().any(|c| decided(c, evict))
            }
            "at" => cycle.at - first == what.parse::<u64>().expect("seconds"),
            other => panic!(
                "scenario {}: unknown `in-cycle` expectation `{other}`",
                self.name
            ),
        }
    }

    fn bound_with_prefix<'a>(
        &'a self,
        prefix: &'a str,
    ) -> impl Iterator<Item = &'a kai_scheduler::cluster::Pod> + 'a {
        self.sim
            .snapshot
            .pods
            .iter()
            .filter(move |p| p.node.is_some() && p.key().starts_with(prefix))
    }

    fn last_pending_reason(&self, pod: &str) -> Option<String> {
        self.sim.cycles.iter().rev().find_map(|c| {
            c.decisions.iter().find_map(|d| match d {
                Decision::Pending { pods, reason, .. } if pods.iter().any(|p| p == pod) => {
                    Some(reason.to_string())
                }
                _ => None,
            })
        })
    }

    fn eviction_reasons<'a>(&'a self, pod: &'a str) -> impl Iterator<Item = String> + 'a {
        self.sim
            .cycles
            .iter()
            .flat_map(|c| &c.decisions)
            .filter_map(move |d| match d {
                Decision::Evict { pod: p, reason, .. } if p == pod => Some(reason.to_string()),
                _ => None,
            })
    }
}

/// Compares both renderings of every scenario with its snapshots, reporting every mismatch
/// (insta writes a `.snap.new` beside each) before failing.
#[test]
fn scenarios_match_their_snapshots() {
    let mut failed = Vec::new();
    for name in scenario_names() {
        let scenario = load(&name);
        let (human, json) = (
            scenario.human(),
            simulate::render_json(&scenario.sim, &scenario.policy),
        );
        let result = catch_unwind(AssertUnwindSafe(|| {
            insta::with_settings!({
                snapshot_path => PathBuf::from("scenarios").join(&name),
                prepend_module_to_snapshot => false,
                omit_expression => true,
                description => format!("kai-scheduler simulate {SCENARIOS}/{name}"),
            }, {
                insta::assert_snapshot!("human", human);
                insta::assert_snapshot!("json", json);
            });
        }));
        if result.is_err() {
            failed.push(name);
        }
    }
    assert!(failed.is_empty(), "snapshots differ for: {failed:?}");
}

/// Every scenario's `expect` file holds: what the issue asks for, checked independently of the
/// snapshots (which record whatever the scheduler does).
#[test]
fn scenarios_meet_their_expectations() {
    let mut report = String::new();
    for name in scenario_names() {
        let scenario = load(&name);
        let unmet = scenario.unmet();
        let gap = std::fs::read_to_string(scenario.dir.join("gap")).ok();
        match (&gap, unmet.is_empty()) {
            (Some(_), true) => report.push_str(&format!(
                "\n{name}: every expectation is met now: delete its `gap` file\n"
            )),
            (Some(gap), false) => eprintln!(
                "known gap in {name} ({}): unmet: {}",
                gap.trim(),
                unmet.join("; ")
            ),
            (None, _) => {}
        }
        if !unmet.is_empty() && gap.is_none() {
            report.push_str(&format!(
                "\n{name}:\n  {}\n{}",
                unmet.join("\n  "),
                scenario.human()
            ));
        }
    }
    assert!(report.is_empty(), "unmet expectations:{report}");
}

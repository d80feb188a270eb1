//! `diff`: what a policy change does — the queues whose terms or fair shares move, a one-line
//! summary like a plan, and the rendered Kubernetes objects as a unified diff. Pure: two checked
//! policies and their demands in, a report out.

use std::fmt::Write as _;

use serde::Serialize;

use crate::explain::{Report, short};
use crate::fairshare::Demand;
use crate::lower::{Artifacts, RenderError, SourceInfo};
use crate::model::{Bound, Policy};
use crate::quantity::ResourceKind;

mod settings;

/// What a changed row is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Subject {
    /// A queue (`name` is the queue).
    Queue,
    /// A namespace's default queue (`name` is the namespace).
    Namespace,
    /// A cluster-wide setting (`name` is empty).
    Cluster,
    /// A priority class (`name` is the class).
    PriorityClass,
    /// A named placement (`name` is the placement).
    Placement,
}

/// A value in a change row: its text for people and, for amounts, durations and counts, a
/// number for programs (JSON shows the number: GPUs in devices, CPUs in cores, memory in bytes,
/// durations in seconds).
#[derive(Debug, Clone, PartialEq)]
pub enum Shown {
    /// An amount, duration or count: how it reads, and its number.
    Number(String, f64),
    /// A yes/no setting.
    Flag(bool),
    /// Anything else (names, strategies, "unlimited", "not governed").
    Text(String),
}

impl Shown {
    /// The text shown in tables.
    pub fn text(&self) -> String {
        match self {
            Shown::Number(text, _) | Shown::Text(text) => text.clone(),
            Shown::Flag(b) => (if *b { "yes" } else { "no" }).to_string(),
        }
    }
}

impl Serialize for Shown {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Shown::Number(_, v) if v.fract() == 0.0 && v.abs() < 9.0e15 => {
                s.serialize_i64(*v as i64)
            }
            Shown::Number(_, v) => s.serialize_f64(*v),
            Shown::Flag(b) => s.serialize_bool(*b),
            Shown::Text(t) => s.serialize_str(t),
        }
    }
}

/// One changed attribute of one queue, namespace, priority class, placement or of the cluster.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Change {
    /// What kind of thing changed.
    pub subject: Subject,
    /// Its name (empty for the cluster).
    pub name: String,
    /// What changed: `gpu quota`, `priority`, `gpu fair share`, `parent`, `queue`, …
    pub what: String,
    /// Before (`None`: it did not exist).
    pub old: Option<Shown>,
    /// After (`None`: it was removed).
    pub new: Option<Shown>,
    /// New minus old, for amounts.
    pub delta: Option<Shown>,
}

impl Change {
    /// A change of one queue's attribute.
    fn queue(name: &str, what: impl Into<String>, old: Option<Shown>, new: Option<Shown>) -> Self {
        Change {
            subject: Subject::Queue,
            name: name.to_string(),
            what: what.into(),
            old,
            new,
            delta: None,
        }
    }

    fn with_delta(mut self, delta: Option<Shown>) -> Self {
        self.delta = delta;
        self
    }

    /// How the subject reads in a table: the queue's name, or `namespace x`, `cluster`, ….
    pub fn subject_text(&self) -> String {
        match self.subject {
            Subject::Queue => self.name.clone(),
            Subject::Namespace => format!("namespace {}", self.name),
            Subject::Cluster => "cluster".to_string(),
            Subject::PriorityClass => format!("priority class {}", self.name),
            Subject::Placement => format!("placement {}", self.name),
        }
    }
}

/// The whole comparison.
#[derive(Debug, Clone, Serialize)]
pub struct PolicyDiff {
    /// The one-line plan.
    pub summary: String,
    /// Queues that exist at both revisions and changed.
    pub changed: Vec<String>,
    /// Queues only at head.
    pub added: Vec<String>,
    /// Queues only at base.
    pub removed: Vec<String>,
    /// Every changed attribute: queue by queue in head order (removed queues last), then
    /// namespaces, cluster settings, priority classes and placements.
    pub changes: Vec<Change>,
    /// Unified diff of the rendered Kubernetes objects (empty when they are equal).
    pub objects_diff: String,
}

impl PolicyDiff {
    /// Whether anything at all differs.
    pub fn is_empty(&self) -> bool {
        self.changes.is_empty() && self.objects_diff.is_empty()
    }
}

/// One side of a comparison.
pub struct Side<'a> {
    /// The checked policy.
    pub policy: &'a Policy,
    /// The demand its fair shares are computed under.
    pub demand: &'a Demand,
    /// How to name it in the unified diff header (`base (abc1234)`, `working tree`).
    pub label: String,
}

/// An amount in stored units as a table cell and a JSON number (devices, cores, bytes).
fn amount(v: i64, kind: ResourceKind) -> Shown {
    let number = match kind {
        ResourceKind::Gpu | ResourceKind::Cpu => v as f64 / 1000.0,
        ResourceKind::Memory => v as f64,
    };
    Shown::Number(short(v, kind), number)
}

fn count(v: i64) -> Shown {
    Shown::Number(v.to_string(), v as f64)
}

fn text(t: impl Into<String>) -> Shown {
    Shown::Text(t.into())
}

fn bound(b: Option<Bound>, kind: ResourceKind) -> Shown {
    match b {
        Some(Bound::Finite(v)) => amount(v, kind),
        Some(Bound::Unlimited) => text("unlimited"),
        None => text("not governed"),
    }
}

fn signed(v: i64, kind: ResourceKind) -> String {
    if v >= 0 {
        format!("+{}", short(v, kind))
    } else {
        format!("-{}", short(-v, kind))
    }
}

fn signed_amount(v: i64, kind: ResourceKind) -> Shown {
    match amount(v, kind) {
        Shown::Number(_, n) => Shown::Number(signed(v, kind), n),
        other => other,
    }
}

fn duration(d: Option<crate::quantity::Duration>) -> Shown {
    match d {
        Some(d) => Shown::Number(d.to_string(), d.0 as f64),
        None => text("none"),
    }
}

fn optional(v: Option<&str>) -> Shown {
    text(v.unwrap_or("none"))
}

/// Compares two policies.
pub fn compare(base: &Side, head: &Side) -> Result<PolicyDiff, RenderError> {
    let base_report = Report::new(base.policy, base.demand);
    let head_report = Report::new(head.policy, head.demand);
    let (base_index, head_index) = (name_index(base.policy), name_index(head.policy));
    let mut changes = Vec::new();
    let (mut changed, mut added, mut removed) = (Vec::new(), Vec::new(), Vec::new());
    let mut quota_moves: Vec<(String, i64)> = Vec::new();
    for (h, hq) in head.policy.queues.iter().enumerate() {
        let Some(&b) = base_index.get(hq.name.as_str()) else {
            added.push(hq.name.clone());
            for kind in ResourceKind::ALL {
                if let Some(r) = hq.resources.get(kind) {
                    let what = format!("{} quota", kind.name());
                    changes.push(Change::queue(
                        &hq.name,
                        what,
                        None,
                        Some(bound(Some(r.quota), kind)),
                    ));
                    if let (ResourceKind::Gpu, Bound::Finite(v)) = (kind, r.quota) {
                        quota_moves.push((hq.name.clone(), v));
                    }
                }
            }
            let share = head_report.share(h, ResourceKind::Gpu).fair_share;
            let share = Some(amount(share, ResourceKind::Gpu));
            changes.push(Change::queue(&hq.name, "gpu fair share", None, share));
            continue;
        };
        let before = changes.len();
        let sides = QueuePair {
            base: base.policy,
            head: head.policy,
            b,
            h,
        };
        sides.terms(&mut changes, &mut quota_moves);
        for kind in ResourceKind::ALL {
            let (bs, hs) = (
                base_report.share(b, kind).fair_share,
                head_report.share(h, kind).fair_share,
            );
            let governed =
                sides.bq().resources.get(kind).is_some() || hq.resources.get(kind).is_some();
            if bs != hs && (kind == ResourceKind::Gpu || governed) {
                let what = format!("{} fair share", kind.name());
                changes.push(
                    Change::queue(
                        &hq.name,
                        what,
                        Some(amount(bs, kind)),
                        Some(amount(hs, kind)),
                    )
                    .with_delta(Some(signed_amount(hs - bs, kind))),
                );
            }
        }
        if changes.len() > before {
            changed.push(hq.name.clone());
        }
    }
    for bq in &base.policy.queues {
        if !head_index.contains_key(bq.name.as_str()) {
            removed.push(bq.name.clone());
            if let Some(Bound::Finite(v)) = bq.resources.gpu.map(|r| r.quota) {
                quota_moves.push((bq.name.clone(), -v));
            }
            changes.push(Change::queue(&bq.name, "queue", Some(text("exists")), None));
        }
    }
    let reordered = order_changes(base.policy, head.policy);
    changes.extend(reordered.iter().cloned());
    let policy_wide = settings::changes(base.policy, head.policy);
    changes.extend(policy_wide.iter().cloned());
    let objects = |side: &Side| Artifacts::new(side.policy, SourceInfo::default()).objects_yaml();
    let (old_yaml, new_yaml) = (objects(base)?, objects(head)?);
    let objects_diff = if old_yaml == new_yaml {
        String::new()
    } else {
        similar::TextDiff::from_lines(&old_yaml, &new_yaml)
            .unified_diff()
            .context_radius(3)
            .header(&base.label, &head.label)
            .to_string()
    };
    let mut summary = summary(&changed, &added, &removed, &quota_moves);
    if !reordered.is_empty() {
        let under: Vec<&str> = reordered
            .iter()
            .map(|c| match c.subject {
                Subject::Cluster => "the top level",
                _ => c.name.as_str(),
            })
            .collect();
        let _ = write!(
            summary,
            "; the order of the queues under {} changed (of two queues that tie, in fair share \
             or in the scheduler's queue order, the one declared first goes first)",
            under.join(", ")
        );
    }
    if let Some(plan) = settings::plan(&policy_wide) {
        let _ = write!(summary, "; {plan}");
    }
    Ok(PolicyDiff {
        summary,
        changed,
        added,
        removed,
        changes,
        objects_diff,
    })
}

/// One queue that exists on both sides: its base index `b` and head index `h`.
struct QueuePair<'a> {
    base: &'a Policy,
    head: &'a Policy,
    b: usize,
    h: usize,
}

impl QueuePair<'_> {
    fn bq(&self) -> &crate::model::Queue {
        &self.base.queues[self.b]
    }

    fn hq(&self) -> &crate::model::Queue {
        &self.head.queues[self.h]
    }

    /// Every declared or inherited term of the queue that changed (not its fair shares).
    fn terms(&self, changes: &mut Vec<Change>, quota_moves: &mut Vec<(String, i64)>) {
        let (bq, hq) = (self.bq(), self.hq());
        let name = hq.name.as_str();
        let mut push = |what: &str, old: Shown, new: Shown| {
            if old != new {
                changes.push(Change::queue(name, what, Some(old), Some(new)));
            }
        };
        let parent = |p: &Policy, q: &crate::model::Queue| {
            text(
                q.parent
                    .map_or("(top level)", |i| p.queues[i].name.as_str()),
            )
        };
        push("parent", parent(self.base, bq), parent(self.head, hq));
        if bq.priority != hq.priority {
            let d = hq.priority as i64 - bq.priority as i64;
            let delta = Shown::Number(format!("{d:+}"), d as f64);
            changes.push(
                Change::queue(
                    name,
                    "priority",
                    Some(count(bq.priority as i64)),
                    Some(count(hq.priority as i64)),
                )
                .with_delta(Some(delta)),
            );
        }
        for kind in ResourceKind::ALL {
            let (br, hr) = (bq.resources.get(kind), hq.resources.get(kind));
            let terms = [
                ("quota", br.map(|r| r.quota), hr.map(|r| r.quota)),
                ("limit", br.map(|r| r.limit), hr.map(|r| r.limit)),
            ];
            for (term, old, new) in terms {
                if old == new {
                    continue;
                }
                let delta = match (old, new) {
                    (Some(Bound::Finite(o)), Some(Bound::Finite(n))) => {
                        Some(signed_amount(n - o, kind))
                    }
                    _ => None,
                };
                if term == "quota" && kind == ResourceKind::Gpu {
                    let finite = |b: Option<Bound>| b.and_then(|b| b.finite()).unwrap_or(0);
                    quota_moves.push((name.to_string(), finite(new) - finite(old)));
                }
                let what = format!("{} {term}", kind.name());
                changes.push(
                    Change::queue(name, what, Some(bound(old, kind)), Some(bound(new, kind)))
                        .with_delta(delta),
                );
            }
            let (bw, hw) = (br.map(|r| r.weight), hr.map(|r| r.weight));
            if bw != hw {
                let w = |w: Option<f64>| {
                    w.map_or(text("not governed"), |w| Shown::Number(format!("{w}"), w))
                };
                changes.push(Change::queue(
                    name,
                    format!("{} weight", kind.name()),
                    Some(w(bw)),
                    Some(w(hw)),
                ));
            }
        }
        let mut push = |what: &str, old: Shown, new: Shown| {
            if old != new {
                changes.push(Change::queue(name, what, Some(old), Some(new)));
            }
        };
        push(
            "default priority class",
            optional(bq.default_priority_class.as_deref()),
            optional(hq.default_priority_class.as_deref()),
        );
        push(
            "placement",
            optional(bq.placement.as_deref()),
            optional(hq.placement.as_deref()),
        );
        push(
            "preempt min-runtime",
            duration(bq.min_runtime.preempt),
            duration(hq.min_runtime.preempt),
        );
        push(
            "reclaim min-runtime",
            duration(bq.min_runtime.reclaim),
            duration(hq.min_runtime.reclaim),
        );
        push(
            "open to all namespaces",
            Shown::Flag(bq.namespaces.open_to_all),
            Shown::Flag(hq.namespaces.open_to_all),
        );
        // Labels can move a queue to another scheduler (KAI's node-pool label picks the shard).
        let keys: std::collections::BTreeSet<&String> =
            bq.labels.keys().chain(hq.labels.keys()).collect();
        for key in keys {
            let value = |q: &crate::model::Queue| optional(q.labels.get(key).map(String::as_str));
            push(&format!("label {key}"), value(bq), value(hq));
        }
    }
}

/// The queues whose children (or, for the top level, whose top-level queues) come in another
/// order, counting only queues on both sides under the same parent: declaration order breaks
/// ties, so moving a queue to a file read earlier or later is a change of meaning, not of
/// layout. One row per parent, and a cluster row for the top level.
fn order_changes(base: &Policy, head: &Policy) -> Vec<Change> {
    let children = |policy: &Policy, parent: Option<&str>| -> Vec<String> {
        policy
            .queues
            .iter()
            .filter(|q| q.parent.map(|p| policy.queues[p].name.as_str()) == parent)
            .map(|q| q.name.clone())
            .collect()
    };
    let parents = std::iter::once(None).chain(head.queues.iter().map(|q| Some(q.name.as_str())));
    let mut rows = Vec::new();
    for parent in parents {
        let (old, new) = (children(base, parent), children(head, parent));
        let old: Vec<&String> = old.iter().filter(|n| new.contains(n)).collect();
        let new: Vec<&String> = new.iter().filter(|n| old.contains(n)).collect();
        if old == new {
            continue;
        }
        let list = |v: &[&String]| v.iter().map(|n| n.as_str()).collect::<Vec<_>>().join(", ");
        let (old, new) = (Some(text(list(&old))), Some(text(list(&new))));
        rows.push(match parent {
            Some(parent) => Change::queue(parent, "order of its queues", old, new),
            None => Change {
                subject: Subject::Cluster,
                name: String::new(),
                what: "order of the top-level queues".to_string(),
                old,
                new,
                delta: None,
            },
        });
    }
    rows
}

fn name_index(policy: &Policy) -> std::collections::HashMap<&str, usize> {
    policy
        .queues
        .iter()
        .enumerate()
        .map(|(i, q)| (q.name.as_str(), i))
        .collect()
}

/// "3 queues changed, 1 added, 0 removed; 4 GPUs of guarantee move from llm-team to vision-team".
fn summary(
    changed: &[String],
    added: &[String],
    removed: &[String],
    moves: &[(String, i64)],
) -> String {
    let plural = |n: usize| if n == 1 { "queue" } else { "queues" };
    let mut text = format!(
        "{} {} changed, {} added, {} removed",
        changed.len(),
        plural(changed.len()),
        added.len(),
        removed.len()
    );
    let gpus = |v: i64| {
        let n = short(v, ResourceKind::Gpu);
        if v == 1000 {
            format!("{n} GPU")
        } else {
            format!("{n} GPUs")
        }
    };
    let losers: Vec<&(String, i64)> = moves.iter().filter(|(_, d)| *d < 0).collect();
    let gainers: Vec<&(String, i64)> = moves.iter().filter(|(_, d)| *d > 0).collect();
    match (losers.as_slice(), gainers.as_slice()) {
        ([], []) => {}
        ([(from, lost)], [(to, gained)]) if -lost == *gained => {
            let _ = write!(
                text,
                "; {} of guarantee move from {from} to {to}",
                gpus(*gained)
            );
        }
        _ => {
            let list = |v: &[&(String, i64)]| {
                v.iter()
                    .map(|(n, d)| format!("{n} {}", signed(*d, ResourceKind::Gpu)))
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            let mut parts = Vec::new();
            if !gainers.is_empty() {
                parts.push(list(&gainers));
            }
            if !losers.is_empty() {
                parts.push(list(&losers));
            }
            let _ = write!(text, "; GPU guarantees: {}", parts.join(", "));
        }
    }
    text
}

fn table(diff: &PolicyDiff) -> Vec<[String; 4]> {
    diff.changes
        .iter()
        .map(|c| {
            let arrow = format!(
                "{} → {}",
                c.old.as_ref().map_or("—".to_string(), Shown::text),
                c.new.as_ref().map_or("removed".to_string(), Shown::text)
            );
            [
                c.subject_text(),
                c.what.clone(),
                arrow,
                c.delta.as_ref().map(Shown::text).unwrap_or_default(),
            ]
        })
        .collect()
}

/// The human report: summary, table, unified diff.
pub fn render_human(diff: &PolicyDiff) -> String {
    let mut out = format!("{}\n", diff.summary);
    if diff.is_empty() {
        return out;
    }
    let mut rows = vec![["subject", "what", "old → new", "delta"].map(String::from)];
    rows.extend(table(diff));
    let widths: Vec<usize> = (0..4)
        .map(|c| rows.iter().map(|r| r[c].chars().count()).max().unwrap_or(0))
        .collect();
    out.push('\n');
    for row in &rows {
        let line: Vec<String> = row
            .iter()
            .zip(&widths)
            .map(|(cell, w)| format!("{cell}{}", " ".repeat(w - cell.chars().count())))
            .collect();
        out.push_str(line.join("  ").trim_end());
        out.push('\n');
    }
    if !diff.objects_diff.is_empty() {
        out.push('\n');
        out.push_str(&diff.objects_diff);
    }
    out
}

/// The markdown report for a pull-request comment: summary, table, YAML diff folded away.
pub fn render_markdown(diff: &PolicyDiff) -> String {
    let mut out = format!("**kai-policy:** {}\n", diff.summary);
    if diff.is_empty() {
        return out;
    }
    out.push_str("\n| subject | what | old → new | delta |\n| --- | --- | --- | ---: |\n");
    for (change, [_, what, arrow, delta]) in diff.changes.iter().zip(table(diff)) {
        let subject = match change.subject {
            Subject::Cluster => "cluster".to_string(),
            Subject::Queue => format!("`{}`", change.name),
            _ => {
                let text = change.subject_text();
                let kind = text.strip_suffix(change.name.as_str()).unwrap_or_default();
                format!("{kind}`{}`", change.name)
            }
        };
        let _ = writeln!(out, "| {subject} | {what} | {arrow} | {delta} |");
    }
    if !diff.objects_diff.is_empty() {
        out.push_str("\n<details><summary>Kubernetes objects</summary>\n\n```diff\n");
        out.push_str(&diff.objects_diff);
        out.push_str("```\n\n</details>\n");
    }
    out
}

/// The JSON report.
pub fn render_json(diff: &PolicyDiff) -> String {
    let mut out = serde_json::to_string_pretty(diff).unwrap_or_default();
    out.push('\n');
    out
}

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

/// One changed attribute of one queue.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Change {
    /// The queue.
    pub queue: String,
    /// What changed: `gpu quota`, `priority`, `gpu fair share`, `parent`, …
    pub what: String,
    /// Before (`None`: the queue did not exist).
    pub old: Option<String>,
    /// After (`None`: the queue was removed).
    pub new: Option<String>,
    /// New minus old, for amounts.
    pub delta: Option<String>,
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
    /// Every changed attribute, queue by queue in head order (removed queues last).
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

fn bound_text(b: Option<Bound>, kind: ResourceKind) -> String {
    match b {
        Some(Bound::Finite(v)) => short(v, kind),
        Some(Bound::Unlimited) => "unlimited".to_string(),
        None => "not governed".to_string(),
    }
}

fn signed(v: i64, kind: ResourceKind) -> String {
    if v >= 0 {
        format!("+{}", short(v, kind))
    } else {
        format!("-{}", short(-v, kind))
    }
}

/// Compares two policies.
pub fn compare(base: &Side, head: &Side) -> Result<PolicyDiff, RenderError> {
    let base_report = Report::new(base.policy, base.demand);
    let head_report = Report::new(head.policy, head.demand);
    let (base_index, head_index) = (name_index(base.policy), name_index(head.policy));
    let mut changes = Vec::new();
    let (mut changed, mut added, mut removed) = (Vec::new(), Vec::new(), Vec::new());
    let mut quota_moves: Vec<(String, i64)> = Vec::new();
    let change = |queue: &str,
                  what: String,
                  old: Option<String>,
                  new: Option<String>,
                  delta: Option<String>| Change {
        queue: queue.to_string(),
        what,
        old,
        new,
        delta,
    };
    for (h, hq) in head.policy.queues.iter().enumerate() {
        let Some(&b) = base_index.get(hq.name.as_str()) else {
            added.push(hq.name.clone());
            for kind in ResourceKind::ALL {
                if let Some(r) = hq.resources.get(kind) {
                    changes.push(change(
                        &hq.name,
                        format!("{} quota", kind.name()),
                        None,
                        Some(bound_text(Some(r.quota), kind)),
                        None,
                    ));
                    if let (ResourceKind::Gpu, Bound::Finite(v)) = (kind, r.quota) {
                        quota_moves.push((hq.name.clone(), v));
                    }
                }
            }
            let share = head_report.share(h, ResourceKind::Gpu).fair_share;
            changes.push(change(
                &hq.name,
                "gpu fair share".into(),
                None,
                Some(short(share, ResourceKind::Gpu)),
                None,
            ));
            continue;
        };
        let bq = &base.policy.queues[b];
        let before = changes.len();
        let parent = |p: &Policy, q: &crate::model::Queue| {
            q.parent
                .map_or("(top level)".to_string(), |i| p.queues[i].name.clone())
        };
        let (bp, hp) = (parent(base.policy, bq), parent(head.policy, hq));
        if bp != hp {
            changes.push(change(&hq.name, "parent".into(), Some(bp), Some(hp), None));
        }
        if bq.priority != hq.priority {
            changes.push(change(
                &hq.name,
                "priority".into(),
                Some(bq.priority.to_string()),
                Some(hq.priority.to_string()),
                Some(format!("{:+}", hq.priority as i64 - bq.priority as i64)),
            ));
        }
        for kind in ResourceKind::ALL {
            let (br, hr) = (bq.resources.get(kind), hq.resources.get(kind));
            let terms = [
                ("quota", br.map(|r| r.quota), hr.map(|r| r.quota)),
                ("limit", br.map(|r| r.limit), hr.map(|r| r.limit)),
            ];
            for (name, old, new) in terms {
                if old != new {
                    let delta = match (old, new) {
                        (Some(Bound::Finite(o)), Some(Bound::Finite(n))) => {
                            Some(signed(n - o, kind))
                        }
                        _ => None,
                    };
                    if name == "quota" && kind == ResourceKind::Gpu {
                        let amount = |b: Option<Bound>| b.and_then(|b| b.finite()).unwrap_or(0);
                        quota_moves.push((hq.name.clone(), amount(new) - amount(old)));
                    }
                    changes.push(change(
                        &hq.name,
                        format!("{} {name}", kind.name()),
                        Some(bound_text(old, kind)),
                        Some(bound_text(new, kind)),
                        delta,
                    ));
                }
            }
            let (bw, hw) = (br.map(|r| r.weight), hr.map(|r| r.weight));
            if bw != hw {
                let w = |w: Option<f64>| w.map_or("not governed".to_string(), |w| format!("{w}"));
                changes.push(change(
                    &hq.name,
                    format!("{} weight", kind.name()),
                    Some(w(bw)),
                    Some(w(hw)),
                    None,
                ));
            }
            let (bs, hs) = (
                base_report.share(b, kind).fair_share,
                head_report.share(h, kind).fair_share,
            );
            if bs != hs && (kind == ResourceKind::Gpu || br.is_some() || hr.is_some()) {
                changes.push(change(
                    &hq.name,
                    format!("{} fair share", kind.name()),
                    Some(short(bs, kind)),
                    Some(short(hs, kind)),
                    Some(signed(hs - bs, kind)),
                ));
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
            changes.push(change(
                &bq.name,
                "queue".into(),
                Some("exists".into()),
                None,
                None,
            ));
        }
    }
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
    let summary = summary(&changed, &added, &removed, &quota_moves);
    Ok(PolicyDiff {
        summary,
        changed,
        added,
        removed,
        changes,
        objects_diff,
    })
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
                c.old.as_deref().unwrap_or("—"),
                c.new.as_deref().unwrap_or("removed")
            );
            [
                c.queue.clone(),
                c.what.clone(),
                arrow,
                c.delta.clone().unwrap_or_default(),
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
    let mut rows = vec![["queue", "what", "old → new", "delta"].map(String::from)];
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
    out.push_str("\n| queue | what | old → new | delta |\n| --- | --- | --- | ---: |\n");
    for [queue, what, arrow, delta] in table(diff) {
        let _ = writeln!(out, "| `{queue}` | {what} | {arrow} | {delta} |");
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

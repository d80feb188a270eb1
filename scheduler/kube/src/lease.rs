//! Leader election with a `coordination.k8s.io/v1` Lease, so that two replicas are safe: only
//! the holder binds, evicts and writes status.
//!
//! [`step`] is the rule (pure): take the Lease when there is none, when it is ours, or when its
//! holder has not renewed it for its whole duration; otherwise follow. Every write carries the
//! `resourceVersion` that was read, so when two replicas try at once the API server lets one
//! win and answers the other 409. [`run`] applies the rule once per period and publishes
//! whether this replica leads. A replica stops leading at the first renewal that does not
//! succeed (or does not finish within the period), so it stops scheduling within one period of
//! losing the Lease; another replica takes over once the Lease has gone unrenewed for its
//! duration.

use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::api::{Api, PostParams};
use tokio::sync::watch;

use crate::access;
use crate::client::Outcome;

/// Who competes for which Lease, and for how long a holder's claim lasts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Election {
    /// The Lease's namespace (the scheduler's own).
    pub namespace: String,
    /// The Lease's name.
    pub name: String,
    /// This replica (the pod's name).
    pub identity: String,
    /// How long a claim lasts without renewal.
    pub duration: Duration,
    /// How often to renew (or try to take) the Lease; well under `duration`.
    pub period: Duration,
}

/// What to do with the Lease as it stands.
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    /// There is none: create it, held by us.
    Create(Lease),
    /// Take it, or renew our hold (the update carries the resourceVersion read).
    Update(Lease),
    /// Another replica holds it and its claim is current.
    Follow {
        /// Who leads.
        holder: String,
    },
}

/// The rule: what to do with `current` at `now`.
pub fn step(election: &Election, current: Option<&Lease>, now: Timestamp) -> Step {
    let seconds = i32::try_from(election.duration.as_secs()).unwrap_or(i32::MAX);
    let Some(lease) = current else {
        return Step::Create(Lease {
            metadata: ObjectMeta {
                name: Some(election.name.clone()),
                namespace: Some(election.namespace.clone()),
                ..ObjectMeta::default()
            },
            spec: Some(LeaseSpec {
                holder_identity: Some(election.identity.clone()),
                lease_duration_seconds: Some(seconds),
                acquire_time: Some(MicroTime(now)),
                renew_time: Some(MicroTime(now)),
                lease_transitions: Some(0),
                ..LeaseSpec::default()
            }),
        });
    };
    let spec = lease.spec.clone().unwrap_or_default();
    let holder = spec.holder_identity.clone().unwrap_or_default();
    let mut taken = lease.clone();
    let ours = holder == election.identity;
    if !ours && !holder.is_empty() {
        let lasts = i64::from(spec.lease_duration_seconds.unwrap_or(seconds).max(0));
        let renewed = spec.renew_time.as_ref().or(spec.acquire_time.as_ref());
        let expired = renewed.is_none_or(|t| now >= t.0 + SignedDuration::from_secs(lasts));
        if !expired {
            return Step::Follow { holder };
        }
    }
    let mut new = spec;
    if !ours {
        new.holder_identity = Some(election.identity.clone());
        new.acquire_time = Some(MicroTime(now));
        new.lease_transitions = Some(new.lease_transitions.unwrap_or(0).saturating_add(1));
    }
    new.lease_duration_seconds = Some(seconds);
    new.renew_time = Some(MicroTime(now));
    taken.spec = Some(new);
    Step::Update(taken)
}

/// Whether this replica leads, after a round.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Leading {
    /// We hold the Lease: schedule.
    Yes,
    /// Another replica holds it.
    No {
        /// Who leads.
        holder: String,
    },
    /// The round failed (the API server did not answer, refused, or another replica won the
    /// race): not leading until a round succeeds.
    Unknown(Outcome),
}

impl Leading {
    /// Whether the scheduling loop may act.
    pub fn leads(&self) -> bool {
        *self == Leading::Yes
    }
}

/// One round: read the Lease, apply the rule, write.
pub async fn round(api: &Api<Lease>, election: &Election) -> Leading {
    let current = match api.get_opt(&election.name).await {
        Ok(current) => current,
        Err(e) => return Leading::Unknown(failure(e, access::LEASE_GET)),
    };
    let post = PostParams::default();
    let written = match step(election, current.as_ref(), Timestamp::now()) {
        Step::Follow { holder } => return Leading::No { holder },
        Step::Create(lease) => api
            .create(&post, &lease)
            .await
            .map_err(|e| failure(e, access::LEASE_CREATE)),
        Step::Update(lease) => api
            .replace(&election.name, &post, &lease)
            .await
            .map_err(|e| failure(e, access::LEASE_UPDATE)),
    };
    match written {
        Ok(_) => Leading::Yes,
        Err(outcome) => Leading::Unknown(outcome),
    }
}

fn failure(e: kube::Error, needed: access::Access) -> Outcome {
    match e {
        kube::Error::Api(s) if s.code == 403 => Outcome::Forbidden(needed),
        kube::Error::Api(s) if s.code == 409 => Outcome::Conflict(s.message),
        kube::Error::Api(s) => Outcome::Failed(s.code, s.message),
        other => Outcome::Failed(0, other.to_string()),
    }
}

/// Gives the Lease up, if this replica holds it: the holder is cleared (with the
/// resourceVersion read, so a Lease another replica has taken meanwhile is left alone), and a
/// follower takes it at its next round instead of waiting out the duration — client-go's
/// `ReleaseOnCancel`. Returns whether it was released.
pub async fn release(api: &Api<Lease>, election: &Election) -> Result<bool, Outcome> {
    let Some(mut lease) = api
        .get_opt(&election.name)
        .await
        .map_err(|e| failure(e, access::LEASE_GET))?
    else {
        return Ok(false);
    };
    let Some(spec) = lease.spec.as_mut() else {
        return Ok(false);
    };
    if spec.holder_identity.as_deref() != Some(election.identity.as_str()) {
        return Ok(false);
    }
    let now = MicroTime(Timestamp::now());
    spec.holder_identity = None;
    spec.lease_duration_seconds = Some(1);
    spec.renew_time = Some(now.clone());
    spec.acquire_time = Some(now);
    api.replace(&election.name, &PostParams::default(), &lease)
        .await
        .map_err(|e| failure(e, access::LEASE_UPDATE))?;
    Ok(true)
}

/// Competes for the Lease until every receiver of `leading` is gone, publishing the result of
/// each round. Run it as its own task beside the scheduling loop, which acts only while
/// `leading.borrow().leads()`.
pub async fn run(api: Api<Lease>, election: Election, leading: watch::Sender<Leading>) {
    let mut tick = tokio::time::interval(election.period);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        // A round that hangs (an API server that accepts the connection and never answers)
        // must not leave a stale `Yes` standing: a round longer than the period has failed.
        let now = match tokio::time::timeout(election.period, round(&api, &election)).await {
            Ok(now) => now,
            Err(_) => Leading::Unknown(Outcome::Failed(
                0,
                format!(
                    "the Lease round took longer than the renewal period ({:?})",
                    election.period
                ),
            )),
        };
        leading.send_if_modified(|was| {
            let changed = *was != now;
            *was = now;
            changed
        });
        if leading.is_closed() {
            return;
        }
    }
}

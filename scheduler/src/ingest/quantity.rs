//! Kubernetes quantities as a cluster holds them. The policy compiler refuses an amount finer
//! than it stores (`cpu: 1u`); a cluster file cannot be fixed by its reader, and Kubernetes
//! accepted it, so here an amount is rounded to whole stored units: requests up (as the
//! kubelet's `MilliValue`/`Value` do), allocatable down (never promise more than there is).

use kai_policy_compiler::quantity::{MAX_AMOUNT, ResourceKind};

/// Which way a fractional stored unit goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Round {
    /// What a pod asks for: up.
    Up,
    /// What a node offers: down.
    Down,
}

/// A quantity in stored units of `kind` (GPU thousandths, millicores, bytes).
pub fn stored(text: &str, kind: ResourceKind, round: Round) -> Result<i64, String> {
    let scale = match kind {
        ResourceKind::Memory => 1,
        ResourceKind::Gpu | ResourceKind::Cpu => 1000,
    };
    units(text, scale, round)
}

/// A quantity in whole units (`scale` 1) or thousandths (`scale` 1000) of a resource, rounded
/// as asked: `ephemeral-storage`, `hugepages-*` and extended resources.
pub fn units(text: &str, scale: i64, round: Round) -> Result<i64, String> {
    let unparsable = || format!("`{text}` is not a Kubernetes quantity");
    let too_large = || format!("`{text}` is too large");
    let trimmed = text.trim();
    let body = trimmed.strip_prefix('+').unwrap_or(trimmed);
    if body.starts_with('-') {
        return Err("a quantity cannot be negative".into());
    }
    let end = body
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(body.len());
    let (number, suffix) = body.split_at(end);
    let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
    if (whole.is_empty() && fraction.is_empty()) || fraction.contains('.') {
        return Err(unparsable());
    }
    let (mut exp10, shift): (i32, u32) = match suffix {
        "" => (0, 0),
        "Ki" => (0, 10),
        "Mi" => (0, 20),
        "Gi" => (0, 30),
        "Ti" => (0, 40),
        "Pi" => (0, 50),
        "Ei" => (0, 60),
        "n" => (-9, 0),
        "u" => (-6, 0),
        "m" => (-3, 0),
        "k" => (3, 0),
        "M" => (6, 0),
        "G" => (9, 0),
        "T" => (12, 0),
        "P" => (15, 0),
        "E" => (18, 0),
        s if s.starts_with(['e', 'E']) => (s[1..].parse::<i32>().map_err(|_| unparsable())?, 0),
        _ => return Err(unparsable()),
    };
    let digits = format!("{whole}{fraction}");
    let digits = digits.trim_start_matches('0');
    if digits.is_empty() {
        return Ok(0);
    }
    if digits.len() > 30 {
        return Err(too_large());
    }
    let mut value: i128 = digits.parse().map_err(|_| unparsable())?;
    value = value
        .checked_mul(i128::from(scale))
        .and_then(|v| v.checked_mul(1i128.checked_shl(shift)?))
        .ok_or_else(too_large)?;
    exp10 -= fraction.len() as i32;
    let limit = i128::from(MAX_AMOUNT);
    while exp10 > 0 {
        value = value
            .checked_mul(10)
            .filter(|&v| v <= limit)
            .ok_or_else(too_large)?;
        exp10 -= 1;
    }
    let mut inexact = false;
    while exp10 < 0 && value > 0 {
        inexact |= value % 10 != 0;
        value /= 10;
        exp10 += 1;
    }
    inexact |= exp10 < 0;
    if inexact && round == Round::Up {
        value += 1;
    }
    i64::try_from(value)
        .ok()
        .filter(|&v| v <= MAX_AMOUNT)
        .ok_or_else(too_large)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finer_than_stored_rounds_the_way_asked() {
        assert_eq!(stored("1u", ResourceKind::Cpu, Round::Up), Ok(1));
        assert_eq!(stored("1u", ResourceKind::Cpu, Round::Down), Ok(0));
        assert_eq!(stored("0.1", ResourceKind::Memory, Round::Up), Ok(1));
        assert_eq!(stored("1500n", ResourceKind::Cpu, Round::Up), Ok(1));
        assert_eq!(stored("2.0005", ResourceKind::Cpu, Round::Up), Ok(2001));
        assert_eq!(stored("250m", ResourceKind::Cpu, Round::Up), Ok(250));
        assert_eq!(
            stored("64Gi", ResourceKind::Memory, Round::Down),
            Ok(64 << 30)
        );
    }

    #[test]
    fn whole_units_for_other_resources() {
        assert_eq!(units("2", 1, Round::Up), Ok(2));
        assert_eq!(units("1500m", 1, Round::Up), Ok(2));
        assert_eq!(units("1500m", 1, Round::Down), Ok(1));
        assert_eq!(units("10G", 1, Round::Up), Ok(10_000_000_000));
        assert_eq!(units("1e3", 1, Round::Up), Ok(1000));
        assert_eq!(units("2Mi", 1, Round::Down), Ok(2 << 20));
        assert_eq!(units("0.1Ki", 1, Round::Up), Ok(103));
        assert_eq!(units("1e-12", 1, Round::Up), Ok(1));
        assert!(units("lots", 1, Round::Up).unwrap_err().contains("`lots`"));
    }
}

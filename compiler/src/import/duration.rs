//! Go's duration syntax (`1h30m0s`, `300s`, `1.5h`), which KAI's `*MinRuntime` fields hold, read
//! back into the policy's whole seconds.

use crate::quantity::{self, Duration};

/// Parses a Go duration (`1h30m0s`, `300s`, `1.5h`, `0`) into whole seconds.
pub fn parse_go_duration(text: &str) -> Result<Duration, String> {
    let bad = || {
        format!(
            "is {text:?}, not a duration (Go's syntax, like \"1h30m0s\" or \"300s\", is expected)"
        )
    };
    let mut rest = text.trim();
    if let Some(r) = rest.strip_prefix('+') {
        rest = r;
    }
    let negative = rest.starts_with('-');
    if negative {
        rest = &rest[1..];
    }
    if rest == "0" {
        return Ok(Duration(0));
    }
    if rest.is_empty() {
        return Err(bad());
    }
    const UNITS: [(&str, u128); 8] = [
        ("ns", 1),
        ("us", 1_000),
        ("\u{b5}s", 1_000),
        ("\u{3bc}s", 1_000),
        ("ms", 1_000_000),
        ("s", 1_000_000_000),
        ("m", 60_000_000_000),
        ("h", 3_600_000_000_000),
    ];
    let mut nanos: u128 = 0;
    while !rest.is_empty() {
        let end = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .ok_or_else(bad)?;
        let (number, after) = rest.split_at(end);
        let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
        if (whole.is_empty() && fraction.is_empty()) || whole.len() > 20 || fraction.len() > 20 {
            return Err(bad());
        }
        let (unit, scale) = UNITS
            .iter()
            .filter(|(u, _)| after.starts_with(u))
            .max_by_key(|(u, _)| u.len())
            .ok_or_else(bad)?;
        let whole: u128 = if whole.is_empty() {
            0
        } else {
            whole.parse().map_err(|_| bad())?
        };
        let fraction_value: u128 = if fraction.is_empty() {
            0
        } else {
            fraction.parse().map_err(|_| bad())?
        };
        let fraction_nanos = fraction_value * scale / 10u128.pow(fraction.len() as u32);
        nanos = whole
            .checked_mul(*scale)
            .and_then(|n| n.checked_add(fraction_nanos))
            .and_then(|n| n.checked_add(nanos))
            .ok_or_else(bad)?;
        rest = &after[unit.len()..];
    }
    if negative && nanos != 0 {
        return Err(format!("is {text:?}, a negative duration"));
    }
    if !nanos.is_multiple_of(1_000_000_000) {
        return Err(format!(
            "is {text:?}, not a whole number of seconds (policy durations are whole seconds)"
        ));
    }
    let seconds = u64::try_from(nanos / 1_000_000_000).map_err(|_| bad())?;
    let duration = Duration(seconds);
    // The policy's own limit (ten years): what the checker would accept back.
    quantity::parse_duration(&duration.to_string())
        .map_err(|_| format!("is {text:?}, longer than a policy may state (ten years)"))?;
    Ok(duration)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_durations_parse_to_whole_seconds() {
        for (text, seconds) in [
            ("1h30m0s", 5400),
            ("300s", 300),
            ("5m", 300),
            ("1.5h", 5400),
            ("0", 0),
            ("0s", 0),
            ("1500ms500ms", 2),
            ("2h45m", 9900),
            ("168h0m0s", 604_800),
        ] {
            assert_eq!(parse_go_duration(text), Ok(Duration(seconds)), "{text}");
        }
        for bad in ["", "5", "1.5s", "-5m", "5x", "h", "1e3s", "99999999999h"] {
            assert!(parse_go_duration(bad).is_err(), "{bad} must be rejected");
        }
    }
}

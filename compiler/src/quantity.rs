//! Kubernetes quantities (`500m`, `960Gi`, `1e3`, `1.5`) and durations (`30m`, `7d`), parsed
//! exactly: no floating point between the user's text and the number we store.

use std::fmt;

/// A resource kind that queues govern.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ResourceKind {
    /// GPU devices (fractions allowed).
    Gpu,
    /// CPU cores.
    Cpu,
    /// Memory bytes.
    Memory,
}

impl ResourceKind {
    /// Every kind, in the order the language and the outputs list them.
    pub const ALL: [ResourceKind; 3] = [ResourceKind::Gpu, ResourceKind::Cpu, ResourceKind::Memory];

    /// The node name in the policy language and the key in KAI's `resources`.
    pub fn name(self) -> &'static str {
        match self {
            ResourceKind::Gpu => "gpu",
            ResourceKind::Cpu => "cpu",
            ResourceKind::Memory => "memory",
        }
    }

    /// How many stored units make one user unit: GPU and CPU are stored in thousandths
    /// (milli-devices, millicores), memory in bytes.
    pub fn scale(self) -> i128 {
        match self {
            ResourceKind::Gpu | ResourceKind::Cpu => 1000,
            ResourceKind::Memory => 1,
        }
    }

    /// The smallest amount a policy can state, in the user's words.
    fn resolution(self) -> &'static str {
        match self {
            ResourceKind::Gpu => "0.001 GPU",
            ResourceKind::Cpu => "1 millicore (0.001 CPU)",
            ResourceKind::Memory => "1 byte",
        }
    }
}

/// The largest amount we store: 2^53, so that every amount is exact as a JSON (float64) number,
/// which is how KAI reads its Queue resources.
pub const MAX_AMOUNT: i64 = 1 << 53;

/// Why a quantity was rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QuantityError {
    /// A minus sign.
    #[error("a quantity cannot be negative")]
    Negative,
    /// Not the Kubernetes quantity grammar.
    #[error("`{0}` is not a Kubernetes quantity")]
    Unparsable(String),
    /// Finer than we store.
    #[error("`{text}` is finer than the smallest {kind} amount, {resolution}")]
    TooPrecise {
        /// The user's text.
        text: String,
        /// The resource.
        kind: &'static str,
        /// The smallest amount.
        resolution: &'static str,
    },
    /// Larger than [`MAX_AMOUNT`].
    #[error("`{0}` is too large")]
    TooLarge(String),
}

/// Which way an amount finer than the stored unit goes, for quantities that were accepted
/// elsewhere (a cluster's objects: Kubernetes took `cpu: 1u`, so its reader cannot refuse it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Round {
    /// Up: what a pod asks for (as the kubelet's `MilliValue`/`Value` do).
    Up,
    /// Down: what a node offers (never promise more than there is).
    Down,
}

/// Parses a quantity (the literal text of a KDL number or string) into stored units of `kind`.
///
/// Accepts Kubernetes' grammar: an optional sign, a decimal number, and one suffix: binary
/// (`Ki`…`Ei`), decimal (`n`, `u`, `m`, `k`, `M`, `G`, `T`, `P`, `E`) or an exponent (`e3`).
/// An amount finer than the stored unit is refused ([`QuantityError::TooPrecise`]).
pub fn parse_quantity(text: &str, kind: ResourceKind) -> Result<i64, QuantityError> {
    parse_scaled(text, kind.scale(), None).map_err(|e| match e {
        QuantityError::TooPrecise { text, .. } => QuantityError::TooPrecise {
            text,
            kind: kind.name(),
            resolution: kind.resolution(),
        },
        other => other,
    })
}

/// Parses a quantity into `scale` stored units per unit (1: whole units, 1000: thousandths),
/// rounding an amount finer than that the way asked instead of refusing it.
pub fn parse_rounded(text: &str, scale: i128, round: Round) -> Result<i64, QuantityError> {
    parse_scaled(text, scale, Some(round))
}

/// The parser: `round` `None` refuses an inexact amount with a `TooPrecise` error whose kind
/// the caller fills in.
fn parse_scaled(text: &str, scale: i128, round: Option<Round>) -> Result<i64, QuantityError> {
    let unparsable = || QuantityError::Unparsable(text.to_string());
    let trimmed = text.trim();
    let (negative, body) = match trimmed.as_bytes().first() {
        Some(b'-') => (true, &trimmed[1..]),
        Some(b'+') => (false, &trimmed[1..]),
        _ => (false, trimmed),
    };
    let number_end = body
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(body.len());
    let (number, suffix) = body.split_at(number_end);
    let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
    if whole.is_empty() && fraction.is_empty() || fraction.contains('.') {
        return Err(unparsable());
    }
    let (mut exp10, binary_shift): (i32, u32) = match suffix {
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
        s if s.starts_with(['e', 'E']) => {
            let e = &s[1..];
            let digits = e.strip_prefix(['+', '-']).unwrap_or(e);
            if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
                return Err(unparsable());
            }
            // Anything past ±400 is far outside what we store either way.
            let value: i32 = digits.parse::<i32>().unwrap_or(i32::MAX).min(400);
            (if e.starts_with('-') { -value } else { value }, 0)
        }
        _ => return Err(unparsable()),
    };
    let too_large = || QuantityError::TooLarge(text.to_string());
    // Mantissa = whole digits then fraction digits, with the decimal point moved into exp10.
    let digits = format!("{whole}{fraction}");
    let digits = digits.trim_start_matches('0');
    let mantissa: i128 = if digits.is_empty() {
        0
    } else if digits.len() > 30 {
        return Err(too_large());
    } else {
        digits.parse().map_err(|_| unparsable())?
    };
    exp10 -= fraction.len() as i32;
    if mantissa == 0 {
        return Ok(0);
    }
    if negative {
        return Err(QuantityError::Negative);
    }
    let mut value = mantissa
        .checked_mul(scale)
        .and_then(|v| v.checked_mul(1i128.checked_shl(binary_shift)?))
        .ok_or_else(too_large)?;
    while exp10 > 0 {
        value = value.checked_mul(10).ok_or_else(too_large)?;
        if value > MAX_AMOUNT as i128 {
            return Err(too_large());
        }
        exp10 -= 1;
    }
    let mut inexact = false;
    while exp10 < 0 && value > 0 {
        inexact |= value % 10 != 0;
        value /= 10;
        exp10 += 1;
    }
    match round {
        _ if !inexact => {}
        None => {
            return Err(QuantityError::TooPrecise {
                text: text.to_string(),
                kind: "",
                resolution: "",
            });
        }
        Some(Round::Up) => value += 1,
        Some(Round::Down) => {}
    }
    if value > MAX_AMOUNT as i128 {
        return Err(too_large());
    }
    Ok(value as i64)
}

/// Formats stored units of `kind` back in the user's units: `24.5` GPUs, `500m` CPU, `960Gi`.
pub fn format_quantity(value: i64, kind: ResourceKind) -> String {
    match kind {
        ResourceKind::Gpu => format_thousandths(value),
        ResourceKind::Cpu if value % 1000 == 0 => (value / 1000).to_string(),
        ResourceKind::Cpu => format!("{value}m"),
        ResourceKind::Memory => {
            // The shortest exact spelling: "512M" rather than "500000Ki", "960Gi" rather than bytes.
            let binary = [
                ("Ei", 1i64 << 60),
                ("Pi", 1 << 50),
                ("Ti", 1 << 40),
                ("Gi", 1 << 30),
                ("Mi", 1 << 20),
                ("Ki", 1 << 10),
            ];
            let decimal = [
                ("E", 10i64.pow(18)),
                ("P", 10i64.pow(15)),
                ("T", 10i64.pow(12)),
                ("G", 10i64.pow(9)),
                ("M", 10i64.pow(6)),
                ("k", 1000),
            ];
            binary
                .iter()
                .chain(decimal.iter())
                .filter(|(_, unit)| value != 0 && value % unit == 0)
                .map(|(suffix, unit)| format!("{}{suffix}", value / unit))
                .chain(std::iter::once(value.to_string()))
                .min_by_key(|text| text.len())
                .unwrap_or_else(|| value.to_string())
        }
    }
}

/// `1500` → `1.5`: a thousandths count written as a plain decimal.
pub fn format_thousandths(value: i64) -> String {
    let whole = value / 1000;
    let frac = (value % 1000).abs();
    if frac == 0 {
        return whole.to_string();
    }
    let digits = format!("{frac:03}");
    format!("{whole}.{}", digits.trim_end_matches('0'))
}

/// A length of time, in whole seconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Duration(pub u64);

/// Why a duration was rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DurationError {
    /// Not the duration grammar.
    #[error(
        "`{0}` is not a duration; write a number and a unit, like \"30s\", \"5m\", \"24h\", \"7d\" or \"1h30m\""
    )]
    Invalid(String),
    /// A duration, but longer than [`MAX_DURATION`].
    #[error("`{0}` is longer than ten years, the longest duration a policy may state")]
    TooLong(String),
    /// A unit repeated or after a smaller one (`"1h1h"`, `"30m1h"`).
    #[error("`{text}` repeats a unit or puts a smaller unit first; write \"{}\"", total.policy_form())]
    UnitOrder {
        /// The user's text.
        text: String,
        /// What the parts add up to.
        total: Duration,
    },
}

/// The longest duration a policy may state (ten years), far beyond any sensible window.
const MAX_DURATION_SECONDS: u64 = 10 * 365 * 86_400;

/// [`MAX_DURATION_SECONDS`] as a duration, for messages.
pub const MAX_DURATION: Duration = Duration(MAX_DURATION_SECONDS);

/// Parses `30s`, `5m`, `24h`, `7d`, `2w` or a sequence like `1h30m`, each unit once and
/// largest first.
///
/// Go's `time.ParseDuration` also sums repeated units in any order (`1h1h` is 2h), but a policy
/// is read by people: one spelling per duration keeps reviews and diffs plain, and the Go
/// durations we lower to are always written largest unit first anyway.
pub fn parse_duration(text: &str) -> Result<Duration, DurationError> {
    let err = || DurationError::Invalid(text.to_string());
    let too_long = || DurationError::TooLong(text.to_string());
    let mut rest = text.trim();
    if rest.is_empty() {
        return Err(err());
    }
    let mut total: u64 = 0;
    let mut previous_unit = u64::MAX;
    let mut misordered = false;
    while !rest.is_empty() {
        let digits = rest.find(|c: char| !c.is_ascii_digit()).ok_or_else(err)?;
        if digits == 0 {
            return Err(err());
        }
        // Digits past what a u64 holds are far over the limit: checked below, once the unit is.
        let n: u64 = rest[..digits].parse().unwrap_or(u64::MAX);
        rest = &rest[digits..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit())
            .unwrap_or(rest.len());
        let seconds = match &rest[..unit_len] {
            "s" => 1,
            "m" => 60,
            "h" => 3_600,
            "d" => 86_400,
            "w" => 604_800,
            _ => return Err(err()),
        };
        rest = &rest[unit_len..];
        misordered |= seconds >= previous_unit;
        previous_unit = seconds;
        total = n
            .checked_mul(seconds)
            .and_then(|s| total.checked_add(s))
            .filter(|&t| t <= MAX_DURATION_SECONDS)
            .ok_or_else(too_long)?;
    }
    if misordered {
        return Err(DurationError::UnitOrder {
            text: text.to_string(),
            total: Duration(total),
        });
    }
    Ok(Duration(total))
}

impl Duration {
    /// The policy's spelling, largest unit first (`"1d12h"`, `"2w"`), which [`parse_duration`]
    /// reads back; [`Display`](fmt::Display) gives Go's, which has no days.
    pub fn policy_form(self) -> String {
        if self.0 == 0 {
            return "0s".to_string();
        }
        let mut rest = self.0;
        let mut out = String::new();
        for (unit, seconds) in [
            ("w", 604_800),
            ("d", 86_400),
            ("h", 3_600),
            ("m", 60),
            ("s", 1),
        ] {
            if rest >= seconds {
                out.push_str(&format!("{}{unit}", rest / seconds));
                rest %= seconds;
            }
        }
        out
    }
}

impl fmt::Display for Duration {
    /// Go's duration syntax (`168h`, `1h30m`, `45s`), which KAI's `*MinRuntime` fields parse.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (h, m, s) = (self.0 / 3600, self.0 / 60 % 60, self.0 % 60);
        if self.0 == 0 {
            return f.write_str("0s");
        }
        if h > 0 {
            write!(f, "{h}h")?;
        }
        if m > 0 {
            write!(f, "{m}m")?;
        }
        if s > 0 {
            write!(f, "{s}s")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::ResourceKind::{Cpu, Gpu, Memory};
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn kubernetes_quantities_parse_exactly() {
        assert_eq!(parse_quantity("500m", Cpu), Ok(500));
        assert_eq!(parse_quantity("1.5", Cpu), Ok(1500));
        assert_eq!(parse_quantity("100", Cpu), Ok(100_000));
        assert_eq!(parse_quantity("960Gi", Memory), Ok(960 << 30));
        assert_eq!(parse_quantity("512M", Memory), Ok(512_000_000));
        assert_eq!(parse_quantity("1e3", Memory), Ok(1000));
        assert_eq!(parse_quantity("1E3", Gpu), Ok(1_000_000));
        assert_eq!(parse_quantity("24.5", Gpu), Ok(24_500));
        assert_eq!(parse_quantity("0.5", Gpu), Ok(500));
        assert_eq!(parse_quantity(".5", Gpu), Ok(500));
        assert_eq!(parse_quantity("5.", Gpu), Ok(5000));
        assert_eq!(parse_quantity("+2", Gpu), Ok(2000));
        assert_eq!(parse_quantity("0", Gpu), Ok(0));
        assert_eq!(parse_quantity("-0", Gpu), Ok(0));
        assert_eq!(parse_quantity("1.5Ki", Memory), Ok(1536));
        assert_eq!(
            parse_quantity("250u", Cpu),
            Err(QuantityError::TooPrecise {
                text: "250u".into(),
                kind: "cpu",
                resolution: "1 millicore (0.001 CPU)"
            })
        );
    }

    #[test]
    fn bad_quantities_say_what_is_wrong() {
        assert_eq!(parse_quantity("-1", Gpu), Err(QuantityError::Negative));
        assert!(matches!(
            parse_quantity("lots", Gpu),
            Err(QuantityError::Unparsable(_))
        ));
        assert!(matches!(
            parse_quantity("#nan", Gpu),
            Err(QuantityError::Unparsable(_))
        ));
        assert!(matches!(
            parse_quantity("1.2.3", Gpu),
            Err(QuantityError::Unparsable(_))
        ));
        assert!(matches!(
            parse_quantity("10Xi", Memory),
            Err(QuantityError::Unparsable(_))
        ));
        assert!(matches!(
            parse_quantity("", Memory),
            Err(QuantityError::Unparsable(_))
        ));
        assert!(matches!(
            parse_quantity("1e", Memory),
            Err(QuantityError::Unparsable(_))
        ));
        assert!(matches!(
            parse_quantity("9Ei", Memory),
            Err(QuantityError::TooLarge(_))
        ));
        assert!(matches!(
            parse_quantity("1e400", Gpu),
            Err(QuantityError::TooLarge(_))
        ));
        assert!(matches!(
            parse_quantity("99999999999999999999999999999999999999999", Gpu),
            Err(QuantityError::TooLarge(_))
        ));
        assert!(matches!(
            parse_quantity("0.0001", Gpu),
            Err(QuantityError::TooPrecise { .. })
        ));
    }

    #[test]
    fn finer_than_stored_rounds_the_way_asked() {
        let cpu = |t: &str, r| parse_rounded(t, Cpu.scale(), r);
        assert_eq!(cpu("1u", Round::Up), Ok(1));
        assert_eq!(cpu("1u", Round::Down), Ok(0));
        assert_eq!(parse_rounded("0.1", Memory.scale(), Round::Up), Ok(1));
        assert_eq!(cpu("1500n", Round::Up), Ok(1));
        assert_eq!(cpu("1500n", Round::Down), Ok(0));
        assert_eq!(cpu("2.0005", Round::Up), Ok(2001));
        assert_eq!(cpu("250m", Round::Up), Ok(250));
        assert_eq!(
            parse_rounded("64Gi", Memory.scale(), Round::Down),
            Ok(64 << 30)
        );
        assert_eq!(parse_rounded("2", 1, Round::Up), Ok(2));
        assert_eq!(parse_rounded("1500m", 1, Round::Up), Ok(2));
        assert_eq!(parse_rounded("1500m", 1, Round::Down), Ok(1));
        assert_eq!(parse_rounded("10G", 1, Round::Up), Ok(10_000_000_000));
        assert_eq!(parse_rounded("1e3", 1, Round::Up), Ok(1000));
        assert_eq!(parse_rounded("2Mi", 1, Round::Down), Ok(2 << 20));
        assert_eq!(parse_rounded("0.1Ki", 1, Round::Up), Ok(103));
        assert_eq!(parse_rounded("1e-12", 1, Round::Up), Ok(1));
        assert_eq!(parse_rounded("1e-400", 1, Round::Up), Ok(1));
        assert_eq!(
            parse_rounded("-1", 1, Round::Up),
            Err(QuantityError::Negative)
        );
        assert!(
            parse_rounded("lots", 1, Round::Up)
                .unwrap_err()
                .to_string()
                .contains("`lots`")
        );
    }

    #[test]
    fn quantities_format_in_the_users_units() {
        assert_eq!(format_quantity(24_500, Gpu), "24.5");
        assert_eq!(format_quantity(500, Cpu), "500m");
        assert_eq!(format_quantity(4000, Cpu), "4");
        assert_eq!(format_quantity(960 << 30, Memory), "960Gi");
        assert_eq!(format_quantity(512_000_000, Memory), "512M");
        assert_eq!(format_quantity(1001, Memory), "1001");
    }

    #[test]
    fn durations_parse_and_print_as_go_does() {
        assert_eq!(parse_duration("5m"), Ok(Duration(300)));
        assert_eq!(parse_duration("1h30m"), Ok(Duration(5400)));
        assert_eq!(
            parse_duration("7d").map(|d| d.to_string()),
            Ok("168h".into())
        );
        assert_eq!(Duration(5400).to_string(), "1h30m");
        assert_eq!(Duration(45).to_string(), "45s");
        for bad in ["", "5", "m", "5x", "-5m", "1.5h", "99999999999999d"] {
            assert!(parse_duration(bad).is_err(), "{bad} should be rejected");
        }
        assert_eq!(parse_duration("1w2d3h4m5s"), Ok(Duration(788_645)));
        for (twice, total) in [
            ("1h1h", "2h"),
            ("30m1h", "1h30m"),
            ("1d1d", "2d"),
            ("5m5m30s", "10m30s"),
        ] {
            assert_eq!(
                parse_duration(twice),
                Err(DurationError::UnitOrder {
                    text: twice.into(),
                    total: parse_duration(total).unwrap(),
                })
            );
        }
        assert_eq!(Duration(788_645).policy_form(), "1w2d3h4m5s");
        assert_eq!(Duration(0).policy_form(), "0s");
        assert_eq!(parse_duration("3650d"), Ok(MAX_DURATION));
        for long in ["3651d", "87601h", "99999999999999999999999d", "3650d1s"] {
            assert_eq!(
                parse_duration(long),
                Err(DurationError::TooLong(long.into()))
            );
        }
    }

    proptest! {
        #[test]
        fn formatted_quantities_parse_back_to_the_same_amount(v in 0i64..MAX_AMOUNT, k in 0usize..3) {
            let kind = ResourceKind::ALL[k];
            prop_assert_eq!(parse_quantity(&format_quantity(v, kind), kind), Ok(v));
        }

        #[test]
        fn any_text_parses_or_is_rejected_without_panicking(s in "\\PC{0,40}") {
            let _ = parse_quantity(&s, Memory);
            let _ = parse_duration(&s);
        }
    }
}

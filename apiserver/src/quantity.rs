//! Kubernetes resource quantities (`k8s.io/apimachinery/pkg/api/resource`
//! `Quantity`): parsing, exact arithmetic and kube's canonical form, for the
//! admission plugins that compare and add resources (LimitRanger,
//! ResourceQuota, RuntimeClass) and the validation of the objects that hold
//! them.
//!
//! No crate does this as kube does: `kube_quantity` parses through `f64`
//! and prints the suffix it was given, and kube-cel keeps its quantity
//! private. kube's own rules, which this module follows:
//!
//! - Grammar: `[+-]? digits [. digits] suffix`, where the suffix is a
//!   binary SI one (`Ki Mi Gi Ti Pi Ei`), a decimal SI one (`n u m "" k M
//!   G T P E`) or a decimal exponent (`e3`, `E-2`). A JSON number is read
//!   as the same text.
//! - The value is exact (a decimal mantissa and a base-10 exponent), then
//!   rounded up (away from zero) to nano units, as kube rounds on parse.
//! - The canonical form ([`std::fmt::Display`], kube's `String()`): a
//!   binary SI value that is an integer and at least 1024 in magnitude is
//!   printed in the largest power-of-1024 suffix that keeps it an integer
//!   (`1536Mi`, not `1.5Gi`); anything else in decimal SI with the exponent
//!   brought to a multiple of 3 (`0.5` → `500m`, `1000m` → `1`); a value of
//!   the exponent format as `12e6`. Zero is `0`.
//! - Sums keep the left side's format unless it is zero, then the right
//!   side's (kube's `Quantity.Add`).
//!
//! Values are `i128` mantissas: up to 36 significant digits, far more than
//! the 63 bits kube's fast path holds; longer numbers are refused rather
//! than rounded.
//!
//! ```text
//! "1.5Gi"  → mantissa 1610612736, exponent 0, BinarySI → "1536Mi"
//! "0.5"    → mantissa 5, exponent -1, DecimalSI        → "500m"
//! "1e3"    → mantissa 1, exponent 3, DecimalExponent   → "1e3"
//! "0.1n"   → rounded up to 1n                          → "1n"
//! ```

use std::cmp::Ordering;
use std::fmt;

use serde_json::Value;

/// How a quantity is printed (kube's `resource.Format`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// `12Mi`: powers of 1024.
    BinarySI,
    /// `12M`, `500m`: powers of 1000.
    DecimalSI,
    /// `12e6`.
    DecimalExponent,
}

/// A parsed quantity: `mantissa × 10^exponent`, printed in `format`.
#[derive(Debug, Clone, Copy)]
pub struct Quantity {
    mantissa: i128,
    exponent: i32,
    format: Format,
}

/// kube's parse errors, word for word.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Not of the quantity grammar.
    #[error("quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'")]
    Format,
    /// The number does not parse (or has more digits than this server keeps).
    #[error("unable to parse numeric part of quantity")]
    Numeric,
    /// An unknown suffix.
    #[error("unable to parse quantity's suffix")]
    Suffix,
}

/// The most significant digits a mantissa may have.
const MAX_DIGITS: usize = 36;

/// Decimal SI suffixes by base-10 exponent.
const DECIMAL_SUFFIXES: &[(i32, &str)] = &[(-9, "n"), (-6, "u"), (-3, "m"), (0, ""), (3, "k"), (6, "M"), (9, "G"), (12, "T"), (15, "P"), (18, "E")];
/// Binary SI suffixes by power of 1024.
const BINARY_SUFFIXES: &[&str] = &["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"];

impl Quantity {
    /// Zero, in decimal SI.
    pub const ZERO: Quantity = Quantity { mantissa: 0, exponent: 0, format: Format::DecimalSI };

    /// The integer `n` in decimal SI (object counts).
    pub fn from_int(n: i64) -> Self {
        Quantity::new(i128::from(n), 0, Format::DecimalSI)
    }

    /// `n` thousandths in decimal SI (`NewMilliQuantity`).
    pub fn from_milli(n: i64) -> Self {
        Quantity::new(i128::from(n), -3, Format::DecimalSI)
    }

    fn new(mantissa: i128, exponent: i32, format: Format) -> Self {
        let mut q = Quantity { mantissa, exponent, format };
        q.normalize();
        q
    }

    /// Moves trailing zeros of the mantissa into the exponent.
    fn normalize(&mut self) {
        if self.mantissa == 0 {
            self.exponent = 0;
            return;
        }
        while self.mantissa % 10 == 0 {
            self.mantissa /= 10;
            self.exponent += 1;
        }
    }

    /// Parses kube's quantity text.
    ///
    /// # Errors
    /// [`Error`] with kube's message for text outside the grammar.
    pub fn parse(s: &str) -> Result<Self, Error> {
        let s = s.trim();
        if s.is_empty() {
            return Err(Error::Format);
        }
        let (positive, number, fraction, suffix) = split(s)?;
        let digits = format!("{number}{fraction}");
        let digits = digits.trim_start_matches('0');
        if digits.len() > MAX_DIGITS {
            return Err(Error::Numeric);
        }
        let mut mantissa: i128 = if digits.is_empty() { 0 } else { digits.parse().map_err(|_| Error::Numeric)? };
        let mut exponent = -(fraction.len() as i32);
        let format = match suffix {
            "" => Format::DecimalSI,
            _ => match DECIMAL_SUFFIXES.iter().find(|(_, x)| *x == suffix) {
                Some((e, _)) => {
                    exponent += e;
                    Format::DecimalSI
                }
                None => match BINARY_SUFFIXES.iter().position(|x| *x == suffix) {
                    Some(p) => {
                        mantissa = mantissa.checked_mul(1i128 << (10 * p)).ok_or(Error::Numeric)?;
                        Format::BinarySI
                    }
                    None => {
                        let exp = suffix.strip_prefix(['e', 'E']).ok_or(Error::Suffix)?;
                        let e: i32 = exp.parse().map_err(|_| Error::Suffix)?;
                        if !(-1000..=1000).contains(&e) {
                            return Err(Error::Numeric);
                        }
                        exponent += e;
                        Format::DecimalExponent
                    }
                },
            },
        };
        let mut q = Quantity::new(mantissa, exponent, format);
        q.round_up_to(-9);
        if q.format == Format::BinarySI && q.mantissa != 0 && q.cmp(&Quantity::from_int(1)) == Ordering::Less {
            q.format = Format::DecimalSI;
        }
        if !positive {
            q.mantissa = -q.mantissa;
        }
        // Too many digits for exact arithmetic after the exponent is applied.
        if q.exponent > 0 && q.scaled_mantissa(0).is_none() {
            return Err(Error::Numeric);
        }
        Ok(q)
    }

    /// Reads a quantity from JSON: a string, or a number (which kube's
    /// decoder also takes).
    ///
    /// # Errors
    /// [`Error::Format`] for other JSON types; parse errors.
    pub fn from_json(v: &Value) -> Result<Self, Error> {
        match v {
            Value::String(s) => Quantity::parse(s),
            Value::Number(n) => Quantity::parse(&n.to_string()),
            _ => Err(Error::Format),
        }
    }

    /// Rounds the magnitude up to a multiple of `10^exponent` (kube's
    /// `RoundUp`: away from zero).
    fn round_up_to(&mut self, exponent: i32) {
        if self.exponent >= exponent {
            return;
        }
        let shift = (exponent - self.exponent) as u32;
        let negative = self.mantissa < 0;
        let mut m = self.mantissa.unsigned_abs();
        match 10u128.checked_pow(shift) {
            Some(d) => m = m.div_ceil(d),
            None => m = u128::from(m != 0),
        }
        let m = m as i128;
        *self = Quantity::new(if negative { -m } else { m }, exponent, self.format);
    }

    /// The mantissa at exponent `exponent` (which must not exceed
    /// `self.exponent`), if it fits.
    fn scaled_mantissa(&self, exponent: i32) -> Option<i128> {
        if self.mantissa == 0 {
            return Some(0);
        }
        let shift = u32::try_from(self.exponent - exponent).ok()?;
        self.mantissa.checked_mul(10i128.checked_pow(shift)?)
    }

    /// Both mantissas at a common exponent.
    fn aligned(a: &Quantity, b: &Quantity) -> Option<(i128, i128, i32)> {
        let e = a.exponent.min(b.exponent);
        Some((a.scaled_mantissa(e)?, b.scaled_mantissa(e)?, e))
    }

    /// The sum (kube's `Add`: the left side's format, or the right side's
    /// when the left is zero). A sum too large for the mantissa saturates.
    #[must_use]
    pub fn add(&self, other: &Quantity) -> Quantity {
        let format = if self.is_zero() { other.format } else { self.format };
        match Quantity::aligned(self, other).and_then(|(a, b, e)| a.checked_add(b).map(|m| (m, e))) {
            Some((m, e)) => Quantity::new(m, e, format),
            None => Quantity::new(if self.sign() + other.sign() < 0 { i128::MIN / 10 } else { i128::MAX / 10 }, 0, format),
        }
    }

    /// The difference (kube's `Sub`, formats as [`Quantity::add`]).
    #[must_use]
    pub fn sub(&self, other: &Quantity) -> Quantity {
        let negated = Quantity { mantissa: -other.mantissa, ..*other };
        self.add(&negated)
    }

    /// Whether the value is zero.
    pub fn is_zero(&self) -> bool {
        self.mantissa == 0
    }

    /// -1, 0 or 1.
    pub fn sign(&self) -> i32 {
        self.mantissa.signum() as i32
    }

    /// The format the value prints in.
    pub fn format(&self) -> Format {
        self.format
    }

    /// The value in units of `10^exponent`, rounded up (kube's
    /// `ScaledValue`, which rounds away from zero); saturates.
    pub fn scaled_value(&self, exponent: i32) -> i128 {
        if self.exponent >= exponent {
            return self.scaled_mantissa(exponent).unwrap_or(if self.mantissa < 0 { i128::MIN } else { i128::MAX });
        }
        let mut q = *self;
        q.round_up_to(exponent);
        q.scaled_mantissa(exponent).unwrap_or(0)
    }

    /// The value rounded up to an integer (kube's `Value`).
    pub fn value(&self) -> i128 {
        self.scaled_value(0)
    }

    /// The value in thousandths, rounded up (kube's `MilliValue`).
    pub fn milli_value(&self) -> i128 {
        self.scaled_value(-3)
    }
}

/// Splits `s` as kube's `parseQuantityString` does: (positive, integer
/// digits, fraction digits, suffix).
fn split(s: &str) -> Result<(bool, &str, &str, &str), Error> {
    let b = s.as_bytes();
    let mut pos = 0;
    let mut positive = true;
    match b.first() {
        Some(b'-') => {
            positive = false;
            pos = 1;
        }
        Some(b'+') => pos = 1,
        _ => {}
    }
    let digits_from = |from: usize| from + b[from..].iter().take_while(|c| c.is_ascii_digit()).count();
    let int_end = digits_from(pos);
    let number = &s[pos..int_end];
    pos = int_end;
    let mut fraction = "";
    if b.get(pos) == Some(&b'.') {
        let end = digits_from(pos + 1);
        fraction = &s[pos + 1..end];
        pos = end;
    }
    if number.is_empty() && fraction.is_empty() && pos == int_end && pos < b.len() {
        return Err(Error::Format);
    }
    let suffix_start = pos;
    while pos < b.len() && b"eEinumkKMGTP".contains(&b[pos]) {
        pos += 1;
    }
    if pos < b.len() && (b[pos] == b'-' || b[pos] == b'+') {
        pos += 1;
    }
    pos = digits_from(pos);
    if pos != b.len() {
        return Err(Error::Format);
    }
    Ok((positive, number, fraction, &s[suffix_start..]))
}

impl PartialEq for Quantity {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Quantity {}

impl PartialOrd for Quantity {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Quantity {
    fn cmp(&self, other: &Self) -> Ordering {
        match Quantity::aligned(self, other) {
            Some((a, b, _)) => a.cmp(&b),
            // One side is too large to align: compare signs, then the one
            // with the larger exponent is the larger in magnitude.
            None => match self.sign().cmp(&other.sign()) {
                Ordering::Equal => {
                    let by_size = self.exponent.cmp(&other.exponent);
                    if self.sign() < 0 {
                        by_size.reverse()
                    } else {
                        by_size
                    }
                }
                o => o,
            },
        }
    }
}

impl fmt::Display for Quantity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.mantissa == 0 {
            return f.write_str("0");
        }
        if self.format == Format::BinarySI {
            // An integer of at least 1024 in magnitude; anything else would
            // lose precision or read oddly in powers of 1024.
            if let Some(mut n) = self.scaled_mantissa(0).filter(|n| n.unsigned_abs() >= 1024) {
                let mut power = 0;
                while power + 1 < BINARY_SUFFIXES.len() && n % 1024 == 0 {
                    n /= 1024;
                    power += 1;
                }
                return write!(f, "{n}{}", BINARY_SUFFIXES[power]);
            }
        }
        let (mut m, mut e) = (self.mantissa, self.exponent);
        let r = e.rem_euclid(3);
        if r != 0 {
            // Bringing the exponent down cannot overflow in practice: a
            // mantissa near the limit is cut off at parse.
            m = m.saturating_mul(10i128.pow(r as u32));
            e -= r;
        }
        match self.format {
            Format::DecimalExponent => {
                if e == 0 {
                    write!(f, "{m}")
                } else {
                    write!(f, "{m}e{e}")
                }
            }
            _ => match DECIMAL_SUFFIXES.iter().find(|(x, _)| *x == e) {
                Some((_, s)) => write!(f, "{m}{s}"),
                None => write!(f, "{m}e{e}"),
            },
        }
    }
}

impl From<Quantity> for Value {
    fn from(q: Quantity) -> Value {
        Value::String(q.to_string())
    }
}

/// A resource list (`{"cpu": "500m", "memory": "1Gi"}`) parsed; entries
/// that do not parse are left out (the resource's validation reports them).
pub fn list(v: &Value) -> std::collections::BTreeMap<String, Quantity> {
    v.as_object().map(|m| m.iter().filter_map(|(k, v)| Quantity::from_json(v).ok().map(|q| (k.clone(), q))).collect()).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(s: &str) -> Quantity {
        Quantity::parse(s).unwrap_or_else(|e| panic!("{s}: {e}"))
    }

    #[test]
    fn canonical_forms_are_kubes() {
        let cases = [
            ("0", "0"),
            ("000", "0"),
            ("1", "1"),
            ("1000m", "1"),
            ("1500m", "1500m"),
            ("0.5", "500m"),
            ("2", "2"),
            ("100m", "100m"),
            ("1k", "1k"),
            ("1000", "1k"),
            ("1500", "1500"),
            ("1Gi", "1Gi"),
            ("1.5Gi", "1536Mi"),
            ("1024Mi", "1Gi"),
            ("1024", "1024"),
            ("512Ki", "512Ki"),
            ("0.5Ki", "512"),
            ("0.5Mi", "512Ki"),
            ("100Mi", "100Mi"),
            ("1e3", "1e3"),
            ("1E3", "1e3"),
            ("12e6", "12e6"),
            ("1e0", "1"),
            ("0.1n", "1n"),
            ("1.0000000001", "1000000001n"),
            ("-1", "-1"),
            ("-0.5", "-500m"),
            ("+5", "5"),
            ("5.", "5"),
            ("10M", "10M"),
            ("1000000", "1M"),
            ("1u", "1u"),
            ("0.001", "1m"),
            ("1Ei", "1Ei"),
        ];
        for (input, want) in cases {
            assert_eq!(q(input).to_string(), want, "{input}");
        }
    }

    #[test]
    fn bad_text_gets_kubes_messages() {
        for (input, want) in
            [("", Error::Format), ("abc", Error::Format), ("1Kb", Error::Format), ("1K", Error::Suffix), ("1x", Error::Format), ("1.2.3", Error::Format), ("1e", Error::Suffix), ("--1", Error::Format)]
        {
            assert_eq!(Quantity::parse(input).err(), Some(want.clone()), "{input:?}");
        }
        assert_eq!(Error::Suffix.to_string(), "unable to parse quantity's suffix");
        assert_eq!(Quantity::parse("1234567890123456789012345678901234567890").err(), Some(Error::Numeric));
    }

    #[test]
    fn arithmetic_is_exact() {
        assert_eq!(q("500m").add(&q("500m")).to_string(), "1");
        assert_eq!(q("1Gi").add(&q("512Mi")).to_string(), "1536Mi");
        assert_eq!(q("0").add(&q("1Gi")).to_string(), "1Gi");
        assert_eq!(q("1").add(&q("1Gi")).to_string(), "1073741825");
        assert_eq!(q("2").sub(&q("500m")).to_string(), "1500m");
        assert_eq!(q("1").sub(&q("1")).to_string(), "0");
        assert!(q("1Gi") > q("1G"));
        assert!(q("1000m") == q("1"));
        assert!(q("-1") < q("0"));
        assert_eq!(q("1.5").value(), 2);
        assert_eq!(q("-1.5").value(), -2);
        assert_eq!(q("1.0001").milli_value(), 1001);
        assert_eq!(q("1Ki").milli_value(), 1_024_000);
        assert_eq!(Quantity::from_milli(1500).to_string(), "1500m");
        assert_eq!(Quantity::from_json(&serde_json::json!(2)).map(|q| q.to_string()), Ok("2".into()));
        assert_eq!(Quantity::from_json(&serde_json::json!(0.5)).map(|q| q.to_string()), Ok("500m".into()));
    }
}

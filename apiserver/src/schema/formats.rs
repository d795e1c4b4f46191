//! String formats a custom resource's schema may name, and their checks.
//!
//! kube-apiserver keeps only the formats in its supported list (apiextensions
//! `validation/formats.go`, v1.33) and drops any other from a CRD's schema
//! before validating; names are compared without dashes (`date-time` is
//! `datetime`). The checks follow go-openapi's `strfmt` registry, close
//! enough for what clients send: UUIDs, RFC 3339 dates and times, base64,
//! IP addresses and CIDRs, MAC addresses, host names, e-mail addresses,
//! URIs, durations, colors, ISBNs, credit-card and social-security numbers.

use std::sync::OnceLock;

use regex::Regex;

/// The supported format names, without dashes.
const SUPPORTED: &[&str] = &[
    "bsonobjectid",
    "uri",
    "email",
    "hostname",
    "ipv4",
    "ipv6",
    "cidr",
    "mac",
    "uuid",
    "uuid3",
    "uuid4",
    "uuid5",
    "isbn",
    "isbn10",
    "isbn13",
    "creditcard",
    "ssn",
    "hexcolor",
    "rgbcolor",
    "byte",
    "password",
    "date",
    "duration",
    "datetime",
];

/// `format` as written when kube validates it (it is supported), else
/// `None`.
pub fn supported(format: Option<&str>) -> Option<&str> {
    let f = format.filter(|f| !f.is_empty())?;
    let norm = f.replace('-', "");
    SUPPORTED.contains(&norm.as_str()).then_some(f)
}

fn re(cell: &'static OnceLock<Option<Regex>>, pattern: &str) -> Option<&'static Regex> {
    cell.get_or_init(|| Regex::new(pattern).ok()).as_ref()
}

macro_rules! matcher {
    ($name:ident, $pattern:expr) => {
        fn $name(s: &str) -> bool {
            static CELL: OnceLock<Option<Regex>> = OnceLock::new();
            re(&CELL, $pattern).is_some_and(|r| r.is_match(s))
        }
    };
}

matcher!(uuid, r"(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}$");
matcher!(uuid3, r"(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?3[0-9a-f]{3}-?[0-9a-f]{4}-?[0-9a-f]{12}$");
matcher!(uuid4, r"(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?4[0-9a-f]{3}-?[89ab][0-9a-f]{3}-?[0-9a-f]{12}$");
matcher!(uuid5, r"(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?5[0-9a-f]{3}-?[89ab][0-9a-f]{3}-?[0-9a-f]{12}$");
matcher!(date_time, r"^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:?\d{2})?$");
matcher!(hostname, r"^([a-zA-Z0-9\p{S}\p{L}]((-?[a-zA-Z0-9\p{S}\p{L}]{0,62})?)|([a-zA-Z0-9\p{S}\p{L}](([a-zA-Z0-9-\p{S}\p{L}]{0,61}[a-zA-Z0-9\p{S}\p{L}])?)(\.)){1,}([a-zA-Z\p{L}]){2,63})$");
matcher!(email, r"^(?:[^<>@\s]+@[^<>@\s]+|[^<>]*<[^<>@\s]+@[^<>@\s]+>)$");
matcher!(duration, r"^(?:[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:ns|us|µs|μs|ms|s|m|h))+$|^\d+\s*(?:ns|us|ms|s|m|h|d|w|nanoseconds?|microseconds?|milliseconds?|seconds?|minutes?|hours?|days?|weeks?)$|^0$");
matcher!(hexcolor, r"^#?([0-9a-fA-F]{3}|[0-9a-fA-F]{6})$");
matcher!(rgbcolor, r"^rgb\(\s*(0|[1-9]\d?|1\d\d?|2[0-4]\d|25[0-5])\s*,\s*(0|[1-9]\d?|1\d\d?|2[0-4]\d|25[0-5])\s*,\s*(0|[1-9]\d?|1\d\d?|2[0-4]\d|25[0-5])\s*\)$");
matcher!(ssn, r"^\d{3}[- ]?\d{2}[- ]?\d{4}$");
matcher!(bson, r"^[0-9a-fA-F]{24}$");
matcher!(creditcard, r"^(?:4[0-9]{12}(?:[0-9]{3})?|5[1-5][0-9]{14}|6(?:011|5[0-9][0-9])[0-9]{12}|3[47][0-9]{13}|3(?:0[0-5]|[68][0-9])[0-9]{11}|(?:2131|1800|35\d{3})\d{11})$");
matcher!(
    mac,
    r"^(?:[0-9a-fA-F]{2}(?:[:-][0-9a-fA-F]{2}){5}|[0-9a-fA-F]{2}(?:[:-][0-9a-fA-F]{2}){7}|[0-9a-fA-F]{2}(?:[:-][0-9a-fA-F]{2}){19}|[0-9a-fA-F]{4}(?:\.[0-9a-fA-F]{4}){2}|[0-9a-fA-F]{4}(?:\.[0-9a-fA-F]{4}){3}|[0-9a-fA-F]{4}(?:\.[0-9a-fA-F]{4}){9})$"
);

fn date(s: &str) -> bool {
    let b = s.as_bytes();
    if b.len() != 10 || b[4] != b'-' || b[7] != b'-' {
        return false;
    }
    let num = |r: std::ops::Range<usize>| s.get(r).and_then(|x| x.parse::<u32>().ok());
    matches!((num(0..4), num(5..7), num(8..10)), (Some(_), Some(m), Some(d)) if (1..=12).contains(&m) && (1..=31).contains(&d))
}

fn isbn10(s: &str) -> bool {
    let digits: Vec<char> = s.chars().filter(|c| *c != '-' && *c != ' ').collect();
    if digits.len() != 10 {
        return false;
    }
    let mut sum = 0;
    for (i, c) in digits.iter().enumerate() {
        let d = match c {
            'X' | 'x' if i == 9 => 10,
            c => match c.to_digit(10) {
                Some(d) => d,
                None => return false,
            },
        };
        sum += d * (10 - i as u32);
    }
    sum.is_multiple_of(11)
}

fn isbn13(s: &str) -> bool {
    let digits: Vec<u32> = s.chars().filter(|c| *c != '-' && *c != ' ').map(|c| c.to_digit(10)).collect::<Option<_>>().unwrap_or_default();
    if digits.len() != 13 {
        return false;
    }
    let sum: u32 = digits.iter().enumerate().map(|(i, d)| if i % 2 == 0 { *d } else { d * 3 }).sum();
    sum.is_multiple_of(10)
}

fn uri(s: &str) -> bool {
    // Go's url.ParseRequestURI: an absolute URI or an absolute path.
    s.starts_with('/') || url::Url::parse(s).is_ok()
}

fn cidr(s: &str) -> bool {
    let Some((ip, bits)) = s.split_once('/') else { return false };
    let Ok(bits) = bits.parse::<u8>() else { return false };
    match ip.parse::<std::net::IpAddr>() {
        Ok(std::net::IpAddr::V4(_)) => bits <= 32,
        Ok(std::net::IpAddr::V6(_)) => bits <= 128,
        Err(_) => false,
    }
}

/// Whether `s` is valid for supported format `format` (as written:
/// `date-time` and `datetime` are the same).
pub fn valid(format: &str, s: &str) -> bool {
    match format.replace('-', "").as_str() {
        "bsonobjectid" => bson(s),
        "uri" => uri(s),
        "email" => email(s),
        "hostname" => hostname(s),
        "ipv4" => s.parse::<std::net::Ipv4Addr>().is_ok(),
        "ipv6" => s.parse::<std::net::Ipv6Addr>().is_ok(),
        "cidr" => cidr(s),
        "mac" => mac(s),
        "uuid" => uuid(s),
        "uuid3" => uuid3(s),
        "uuid4" => uuid4(s),
        "uuid5" => uuid5(s),
        "isbn" => isbn10(s) || isbn13(s),
        "isbn10" => isbn10(s),
        "isbn13" => isbn13(s),
        "creditcard" => creditcard(&s.chars().filter(char::is_ascii_digit).collect::<String>()),
        "ssn" => ssn(s),
        "hexcolor" => hexcolor(s),
        "rgbcolor" => rgbcolor(s),
        "byte" => super::decode::go_base64(s).is_ok(),
        "date" => date(s),
        "duration" => duration(s),
        "datetime" => date_time(s) && s.get(0..10).is_some_and(date),
        _ => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats() {
        let cases = [
            ("uuid", "123e4567-e89b-12d3-a456-426614174000", true),
            ("uuid", "not-a-uuid", false),
            ("uuid4", "123e4567-e89b-42d3-a456-426614174000", true),
            ("date-time", "2024-01-02T03:04:05Z", true),
            ("date-time", "2024-01-02T03:04:05.123+01:00", true),
            ("date-time", "yesterday", false),
            ("date", "2024-02-30", true),
            ("date", "2024-13-01", false),
            ("byte", "aGVsbG8=", true),
            ("byte", "!!", false),
            ("ipv4", "10.0.0.1", true),
            ("ipv4", "10.0.0.256", false),
            ("ipv6", "::1", true),
            ("cidr", "10.0.0.0/8", true),
            ("cidr", "10.0.0.0/33", false),
            ("mac", "01:23:45:67:89:ab", true),
            ("hostname", "example.com", true),
            ("hostname", "-bad", false),
            ("email", "a@b.c", true),
            ("email", "nope", false),
            ("duration", "1h30m", true),
            ("duration", "3 days", true),
            ("duration", "soon", false),
            ("isbn13", "978-0321751041", true),
            ("isbn10", "0321751043", true),
            ("hexcolor", "#FFF", true),
            ("rgbcolor", "rgb(1, 2, 3)", true),
        ];
        for (f, s, ok) in cases {
            assert_eq!(valid(f, s), ok, "{f} {s}");
        }
        assert_eq!(supported(Some("date-time")), Some("date-time"));
        assert_eq!(supported(Some("int32")), None);
        assert_eq!(supported(None), None);
    }
}

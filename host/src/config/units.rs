//! Durations (`500ms`, `10s`, `5m`, `1h`) and byte quantities (`64Mi`, `1Gi`, `1048576`) as
//! written in the host configuration.

use std::time::Duration;

/// Why a duration or quantity cannot be read. The caller adds which field it was.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UnitError {
    /// Not `<number><unit>`.
    #[error("`{0}` is not a duration like `500ms`, `10s`, `5m` or `1h`")]
    Duration(String),
    /// Not `<number>` or `<number><Ki|Mi|Gi>`.
    #[error("`{0}` is not a size like `64Mi`, `1Gi` or a number of bytes")]
    Quantity(String),
}

/// Parses `500ms`, `10s`, `5m`, `1h` (one unit, whole numbers).
pub(crate) fn parse_duration(text: &str) -> Result<Duration, UnitError> {
    let bad = || UnitError::Duration(text.to_owned());
    let split = text.find(|c: char| !c.is_ascii_digit()).ok_or_else(bad)?;
    let (number, unit) = text.split_at(split);
    let n: u64 = number.parse().map_err(|_| bad())?;
    let ms = match unit {
        "ms" => Some(n),
        "s" => n.checked_mul(1_000),
        "m" => n.checked_mul(60_000),
        "h" => n.checked_mul(3_600_000),
        _ => None,
    };
    ms.map(Duration::from_millis).ok_or_else(bad)
}

/// Parses a byte count with an optional binary suffix.
pub(crate) fn parse_quantity(text: &str) -> Result<u64, UnitError> {
    let bad = || UnitError::Quantity(text.to_owned());
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let n: u64 = number.parse().map_err(|_| bad())?;
    let shift = match unit {
        "" => 0,
        "Ki" => 10,
        "Mi" => 20,
        "Gi" => 30,
        _ => return Err(bad()),
    };
    n.checked_mul(1 << shift).ok_or_else(bad)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_durations_in_each_unit() {
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("10s"), Ok(Duration::from_secs(10)));
        assert_eq!(parse_duration("5m"), Ok(Duration::from_secs(300)));
        assert_eq!(parse_duration("1h"), Ok(Duration::from_secs(3600)));
        assert_eq!(parse_duration("0s"), Ok(Duration::ZERO));
    }

    #[test]
    fn refuses_durations_without_a_known_unit() {
        for bad in ["10", "s", "1.5s", "10 s", "3d", "-1s", ""] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn reads_binary_quantities_and_plain_bytes() {
        assert_eq!(parse_quantity("64Mi"), Ok(64 << 20));
        assert_eq!(parse_quantity("1Gi"), Ok(1 << 30));
        assert_eq!(parse_quantity("4096"), Ok(4096));
        assert!(parse_quantity("64MB").is_err());
        assert!(parse_quantity("Mi").is_err());
    }
}

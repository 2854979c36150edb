//! Deployment schedules: a 5-field POSIX cron expression (minute hour day-of-month month
//! day-of-week; day-of-week 0–7, 0 and 7 Sunday; day-of-month and day-of-week both
//! restricted match either) in an IANA time zone, evaluated by `croner` over `chrono-tz`.
//!
//! Daylight-saving time: a local time that a spring-forward skips fires once, at the
//! first valid instant after the gap; a local time that a fall-back repeats fires once,
//! at its first occurrence. Slots are whole minutes, in epoch milliseconds.

use std::str::FromStr;

use chrono::{DateTime, TimeZone, Utc};
use chrono_tz::Tz;
use croner::Cron;

/// The fields of an expression, in order, for messages.
const FIELDS: [&str; 5] = ["minute", "hour", "day-of-month", "month", "day-of-week"];
const MONTHS: [&str; 12] = ["JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"];
const DAYS: [&str; 7] = ["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"];
/// How many slots [`Schedule::due`] walks at most after downtime.
const MAX_CATCH_UP_STEPS: usize = 200_000;

/// A parsed schedule.
#[derive(Debug, Clone)]
pub struct Schedule {
    cron: Cron,
    tz: Tz,
}

impl Schedule {
    /// Parses and validates an expression and a time zone. The error names the field
    /// (`schedule.expression` or `schedule.timezone`) and what is wrong.
    pub fn parse(expression: &str, timezone: &str) -> Result<Self, String> {
        let at = "schedule.expression";
        let trimmed = expression.trim();
        if trimmed.starts_with('@') {
            return Err(format!("{at}: predefined shortcuts such as {trimmed:?} are not supported; give 5 fields"));
        }
        let fields: Vec<&str> = trimmed.split_whitespace().collect();
        match fields.len() {
            5 => {}
            6 | 7 => {
                return Err(format!(
                    "{at}: seconds and year fields are not supported; give 5 fields (minute hour day-of-month \
                     month day-of-week), got {}",
                    fields.len()
                ));
            }
            n => return Err(format!("{at}: expected 5 fields (minute hour day-of-month month day-of-week), got {n}")),
        }
        for (i, field) in fields.iter().enumerate() {
            let name = FIELDS[i];
            let mut rest = field.to_ascii_uppercase();
            let names: &[&str] = match i {
                3 => &MONTHS,
                4 => &DAYS,
                _ => &[],
            };
            for n in names {
                rest = rest.replace(n, "");
            }
            for special in ['L', 'W', '#', '?'] {
                if rest.contains(special) {
                    return Err(format!(
                        "{at}: {name} field {field:?}: the special character {special} is not supported"
                    ));
                }
            }
            if let Some(bad) = rest.chars().find(|c| !(c.is_ascii_digit() || matches!(c, '*' | ',' | '-' | '/'))) {
                return Err(format!("{at}: {name} field {field:?}: unexpected character {bad:?}"));
            }
        }
        let cron = Cron::new(trimmed).parse().map_err(|e| format!("{at}: {e}"))?;
        let tz = Tz::from_str(timezone).map_err(|_| {
            format!("schedule.timezone: {timezone:?} is not an IANA time zone (e.g. \"UTC\", \"Europe/Paris\")")
        })?;
        Ok(Schedule { cron, tz })
    }

    /// The first slot strictly after `after_ms`.
    pub fn next_after(&self, after_ms: i64) -> Option<i64> {
        let after = Utc.timestamp_millis_opt(after_ms).single()?;
        // Slots are whole minutes: search from the whole second at or before `after`.
        let mut from: DateTime<Tz> = Utc.timestamp_opt(after_ms.div_euclid(1000), 0).single()?.with_timezone(&self.tz);
        // In a repeated hour the search can land on the first occurrence of a local time
        // already behind `after`: search again past it (that time fired once already).
        for _ in 0..4 {
            let next = self.cron.find_next_occurrence(&from, false).ok()?;
            if next.with_timezone(&Utc) > after {
                return Some(next.timestamp_millis());
            }
            from = next;
        }
        None
    }

    /// Up to `n` slots strictly after `after_ms`.
    pub fn upcoming(&self, after_ms: i64, n: usize) -> Vec<i64> {
        let mut out = Vec::with_capacity(n);
        let mut at = after_ms;
        while out.len() < n {
            let Some(next) = self.next_after(at) else { break };
            out.push(next);
            at = next;
        }
        out
    }

    /// For a deployment whose next slot `next_slot_ms` is at or before `now_ms`: the
    /// slot that fires — the latest slot not after now (after downtime only the latest
    /// missed slot fires) — and the slot after now, which becomes the next one.
    pub fn due(&self, next_slot_ms: i64, now_ms: i64) -> Option<(i64, i64)> {
        let mut slot = next_slot_ms;
        for _ in 0..MAX_CATCH_UP_STEPS {
            let next = self.next_after(slot)?;
            if next > now_ms {
                return Some((slot, next));
            }
            slot = next;
        }
        Some((slot, self.next_after(now_ms)?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(rfc3339: &str) -> i64 {
        DateTime::parse_from_rfc3339(rfc3339).unwrap().timestamp_millis()
    }

    fn at(ms: i64) -> String {
        Utc.timestamp_millis_opt(ms).unwrap().to_rfc3339()
    }

    #[test]
    fn refuses_extended_syntax_naming_the_field() {
        for (expression, needle) in [
            ("0 0 9 * * 1", "seconds and year"),
            ("0 9 * * 1 2026 x", "seconds and year"),
            ("@daily", "predefined shortcuts"),
            ("0 9 L * *", "day-of-month field \"L\": the special character L"),
            ("0 9 15W * *", "day-of-month field \"15W\": the special character W"),
            ("0 9 * * 1#2", "day-of-week field \"1#2\": the special character #"),
            ("0 9 ? * 1", "day-of-month field \"?\": the special character ?"),
            ("0 9 * * 5L", "day-of-week field \"5L\": the special character L"),
            ("0 9 * *", "expected 5 fields"),
            ("61 * * * *", "schedule.expression"),
            ("x * * * *", "minute field \"x\""),
        ] {
            let error = Schedule::parse(expression, "UTC").unwrap_err();
            assert!(error.contains(needle), "{expression}: {error}");
        }
        let error = Schedule::parse("* * * * *", "Mars/Olympus").unwrap_err();
        assert!(error.starts_with("schedule.timezone:"), "{error}");
        // Names are plain POSIX-compatible aliases, not the `W` or `L` specials.
        Schedule::parse("0 9 * JUL WED", "UTC").unwrap();
        Schedule::parse("0 9 * * 1-5", "America/Los_Angeles").unwrap();
        Schedule::parse("*/15 * * * 7", "UTC").unwrap();
    }

    #[test]
    fn every_minute_and_weekdays() {
        let s = Schedule::parse("* * * * *", "UTC").unwrap();
        assert_eq!(s.next_after(ms("2026-01-01T00:00:00Z")), Some(ms("2026-01-01T00:01:00Z")));
        assert_eq!(s.next_after(ms("2026-01-01T00:00:30.5Z")), Some(ms("2026-01-01T00:01:00Z")));
        let s = Schedule::parse("0 9 * * 1-5", "Europe/Paris").unwrap();
        // Friday 2026-01-02 10:00 Paris → Monday 2026-01-05 09:00 Paris (08:00 UTC).
        assert_eq!(at(s.next_after(ms("2026-01-02T09:00:00Z")).unwrap()), at(ms("2026-01-05T08:00:00Z")));
        // Sunday is 0 and 7.
        let zero = Schedule::parse("0 12 * * 0", "UTC").unwrap();
        let seven = Schedule::parse("0 12 * * 7", "UTC").unwrap();
        assert_eq!(zero.next_after(ms("2026-01-01T00:00:00Z")), Some(ms("2026-01-04T12:00:00Z")));
        assert_eq!(seven.next_after(ms("2026-01-01T00:00:00Z")), Some(ms("2026-01-04T12:00:00Z")));
    }

    #[test]
    fn a_skipped_local_time_fires_once_at_the_next_valid_instant() {
        // New York springs forward on 2026-03-08: 02:00 EST becomes 03:00 EDT, so 02:30
        // does not exist that day.
        let s = Schedule::parse("30 2 * * *", "America/New_York").unwrap();
        let slots: Vec<String> = s.upcoming(ms("2026-03-07T12:00:00Z"), 2).into_iter().map(at).collect();
        assert_eq!(slots, [at(ms("2026-03-08T03:00:00-04:00")), at(ms("2026-03-09T02:30:00-04:00"))]);
        // Every minute: the hour that does not exist is simply not there, no slot twice.
        let s = Schedule::parse("* * * * *", "America/New_York").unwrap();
        let slots = s.upcoming(ms("2026-03-08T01:58:00-05:00"), 3);
        assert_eq!(
            slots.into_iter().map(at).collect::<Vec<_>>(),
            [
                at(ms("2026-03-08T01:59:00-05:00")),
                at(ms("2026-03-08T03:00:00-04:00")),
                at(ms("2026-03-08T03:01:00-04:00"))
            ]
        );
    }

    #[test]
    fn a_repeated_local_time_fires_once() {
        // New York falls back on 2026-11-01: 01:00–01:59 happens twice (EDT, then EST).
        let s = Schedule::parse("30 1 * * *", "America/New_York").unwrap();
        let slots: Vec<String> = s.upcoming(ms("2026-10-31T12:00:00Z"), 2).into_iter().map(at).collect();
        assert_eq!(slots, [at(ms("2026-11-01T01:30:00-04:00")), at(ms("2026-11-02T01:30:00-05:00"))]);
        // Asked during the second 01:xx, the first 01:30 has passed: next is tomorrow's.
        assert_eq!(s.next_after(ms("2026-11-01T01:10:00-05:00")), Some(ms("2026-11-02T01:30:00-05:00")));
        // Every minute through the repeated hour: strictly increasing, no slot twice.
        let s = Schedule::parse("* * * * *", "America/New_York").unwrap();
        let slots = s.upcoming(ms("2026-11-01T00:30:00-04:00"), 200);
        assert!(slots.windows(2).all(|w| w[0] < w[1]));
    }

    #[test]
    fn after_downtime_only_the_latest_missed_slot_fires() {
        let s = Schedule::parse("*/5 * * * *", "UTC").unwrap();
        let (slot, next) = s.due(ms("2026-01-01T00:00:00Z"), ms("2026-01-01T03:07:00Z")).unwrap();
        assert_eq!((at(slot), at(next)), (at(ms("2026-01-01T03:05:00Z")), at(ms("2026-01-01T03:10:00Z"))));
        // On time: the slot itself.
        let (slot, next) = s.due(ms("2026-01-01T00:00:00Z"), ms("2026-01-01T00:00:00.200Z")).unwrap();
        assert_eq!((slot, next), (ms("2026-01-01T00:00:00Z"), ms("2026-01-01T00:05:00Z")));
    }
}

//! Proleptic Gregorian dates (years 1 to 9999) and UTC day arithmetic for
//! time grounding.
//!
//! Every constructor and shift returns `None` where a date would leave the
//! supported range or does not exist, so that grounding can drop that one
//! expression instead of failing (the Python reference raises and catches
//! `ValueError`/`OverflowError` at the same points).

/// Seconds in a day.
pub const DAY: i64 = 86_400;
/// Ordinal (days since 0000-12-31, so 0001-01-01 is 1) of 1970-01-01.
const EPOCH_ORD: i64 = 719_163;
/// Ordinal of 9999-12-31, the last supported day.
const MAX_ORD: i64 = 3_652_059;
const MIN_YEAR: i64 = 1;
const MAX_YEAR: i64 = 9999;

/// A calendar day.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Date {
    pub year: i64,
    pub month: i64,
    pub day: i64,
}

fn is_leap(year: i64) -> bool {
    year % 4 == 0 && (year % 100 != 0 || year % 400 == 0)
}

/// Days in `month` of `year` (the second value of Python's `calendar.monthrange`);
/// `None` for a month outside 1..=12 or a year outside 1..=9999.
pub fn days_in_month(year: i64, month: i64) -> Option<i64> {
    if !(MIN_YEAR..=MAX_YEAR).contains(&year) {
        return None;
    }
    Some(match month {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if is_leap(year) => 29,
        2 => 28,
        _ => return None,
    })
}

/// Days before January 1st of `year` (counted from 0001-01-01).
fn days_before_year(year: i64) -> i64 {
    let y = year - 1;
    y * 365 + y / 4 - y / 100 + y / 400
}

fn days_before_month(year: i64, month: i64) -> i64 {
    const CUMULATIVE: [i64; 12] = [0, 31, 59, 90, 120, 151, 181, 212, 243, 273, 304, 334];
    CUMULATIVE[(month - 1) as usize] + i64::from(month > 2 && is_leap(year))
}

impl Date {
    /// The day `year-month-day`, if it exists in years 1..=9999.
    pub fn new(year: i64, month: i64, day: i64) -> Option<Date> {
        let last = days_in_month(year, month)?;
        (1..=last)
            .contains(&day)
            .then_some(Date { year, month, day })
    }

    /// Days since 0000-12-31 (0001-01-01 is 1), like Python's `date.toordinal`.
    pub fn ordinal(self) -> i64 {
        days_before_year(self.year) + days_before_month(self.year, self.month) + self.day
    }

    /// The inverse of [`Date::ordinal`], if the ordinal is in range.
    pub fn from_ordinal(ord: i64) -> Option<Date> {
        if !(1..=MAX_ORD).contains(&ord) {
            return None;
        }
        // Estimate the year from the mean year length, then correct it.
        let mut year = (ord - 1) * 400 / 146_097 + 1;
        while days_before_year(year) >= ord {
            year -= 1;
        }
        while days_before_year(year + 1) < ord {
            year += 1;
        }
        let day_of_year = ord - days_before_year(year);
        let mut month = 12;
        while days_before_month(year, month) >= day_of_year {
            month -= 1;
        }
        Some(Date {
            year,
            month,
            day: day_of_year - days_before_month(year, month),
        })
    }

    /// Monday = 0 ... Sunday = 6.
    pub fn weekday(self) -> i64 {
        (self.ordinal() + 6) % 7
    }

    /// This day moved by `n` days, if still in range.
    pub fn add_days(self, n: i64) -> Option<Date> {
        Date::from_ordinal(self.ordinal().checked_add(n)?)
    }

    /// The Monday of this day's Monday-based week.
    pub fn monday(self) -> Option<Date> {
        self.add_days(-self.weekday())
    }

    /// The Unix second at which this day starts (UTC).
    pub fn start(self) -> i64 {
        (self.ordinal() - EPOCH_ORD) * DAY
    }

    /// The day containing Unix second `ts` (UTC), if in range.
    pub fn of_timestamp(ts: i64) -> Option<Date> {
        Date::from_ordinal(ts.div_euclid(DAY) + EPOCH_ORD)
    }
}

/// `(year, month)` moved by `n` months.
pub fn add_months(year: i64, month: i64, n: i64) -> (i64, i64) {
    let idx = year * 12 + (month - 1) + n;
    (idx.div_euclid(12), idx.rem_euclid(12) + 1)
}

/// `[start, end)` of a day.
pub fn day_iv(d: Date) -> (i64, i64) {
    let t = d.start();
    (t, t + DAY)
}

/// `[start, end)` of the Monday-based week containing `d`.
pub fn week_iv(d: Date) -> Option<(i64, i64)> {
    let t = d.monday()?.start();
    Some((t, t + 7 * DAY))
}

/// `[start, end)` of a calendar month.
pub fn month_iv(year: i64, month: i64) -> Option<(i64, i64)> {
    let (ny, nm) = add_months(year, month, 1);
    Some((
        Date::new(year, month, 1)?.start(),
        Date::new(ny, nm, 1)?.start(),
    ))
}

/// `[start, end)` of a calendar year.
pub fn year_iv(year: i64) -> Option<(i64, i64)> {
    Some((
        Date::new(year, 1, 1)?.start(),
        Date::new(year + 1, 1, 1)?.start(),
    ))
}

/// `[start, end)` of the three-month season starting at `first_month` of `year`.
pub fn season_iv(year: i64, first_month: i64) -> Option<(i64, i64)> {
    let (y2, m2) = add_months(year, first_month, 3);
    Some((
        Date::new(year, first_month, 1)?.start(),
        Date::new(y2, m2, 1)?.start(),
    ))
}

/// The year Y in {y-1, y, y+1} whose `(Y, month, day)` (day clamped to the
/// month's length) is nearest to `obs`; the earlier year wins a tie.
pub fn nearest_year(obs: Date, month: i64, day: i64) -> Option<i64> {
    let mut best: Option<(i64, i64)> = None;
    for y in [obs.year - 1, obs.year, obs.year + 1] {
        let dd = day.min(days_in_month(y, month)?);
        let dist = (Date::new(y, month, dd)?.ordinal() - obs.ordinal()).abs();
        if best.is_none_or(|(_, d)| dist < d) {
            best = Some((y, dist));
        }
    }
    best.map(|(y, _)| y)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ordinals_round_trip() {
        assert_eq!(Date::new(1, 1, 1).unwrap().ordinal(), 1);
        assert_eq!(Date::new(1970, 1, 1).unwrap().ordinal(), EPOCH_ORD);
        assert_eq!(Date::new(9999, 12, 31).unwrap().ordinal(), MAX_ORD);
        for ord in (1..=MAX_ORD)
            .step_by(97)
            .chain([MAX_ORD, 59, 60, 61, 730_179])
        {
            let d = Date::from_ordinal(ord).unwrap();
            assert_eq!(d.ordinal(), ord);
            assert_eq!(Date::new(d.year, d.month, d.day), Some(d));
        }
        assert_eq!(Date::from_ordinal(0), None);
        assert_eq!(Date::from_ordinal(MAX_ORD + 1), None);
    }

    #[test]
    fn weekdays_and_months() {
        // 2024-03-10 was a Sunday; 0001-01-01 a Monday.
        assert_eq!(Date::new(2024, 3, 10).unwrap().weekday(), 6);
        assert_eq!(Date::new(1, 1, 1).unwrap().weekday(), 0);
        assert_eq!(days_in_month(2024, 2), Some(29));
        assert_eq!(days_in_month(1900, 2), Some(28));
        assert_eq!(days_in_month(2000, 2), Some(29));
        assert_eq!(Date::new(2023, 2, 29), None);
        assert_eq!(add_months(2023, 1, -1), (2022, 12));
        assert_eq!(add_months(2023, 12, 1), (2024, 1));
        assert_eq!(Date::of_timestamp(-1), Date::new(1969, 12, 31));
        assert_eq!(month_iv(9999, 12), None);
    }
}

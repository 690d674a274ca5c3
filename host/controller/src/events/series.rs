//! Which series an Event joins: the bound on distinct notes per (reporter, object, type,
//! reason) ([`Aggregator`]), and the kube-runtime [`Recorder`]s that keep each note's series
//! ([`Recorders`]). The module doc of [`super`] says what the behaviour is and why.

use std::collections::HashMap;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::time::{Duration, Instant};

use kube::Client;
use kube::runtime::events::{Recorder, Reporter};

use wasmop_core::cluster::EventType;

/// Distinct notes per (reporter, object, type, reason) and [`NOTE_WINDOW`] that stay
/// distinct Events: client-go's `tools/record` default (10 per object and reason).
pub(crate) const DISTINCT_NOTES: usize = 10;
/// The period the bound counts in, from its first note: client-go's 10 minutes, but fixed
/// rather than sliding (see the module doc of [`super`]).
pub(crate) const NOTE_WINDOW: Duration = Duration::from_secs(600);
/// Periods kept before the oldest are forgotten, so the aggregator's memory stays bounded
/// (about 100 bytes of digests plus the key per entry).
const MAX_PERIODS: usize = 10_000;
/// How long kube-runtime's `Recorder` keeps a series after its last Event (its private
/// `CACHE_TTL`): a recorder idle this long holds nothing a later Event could join, so
/// dropping it loses nothing.
const SERIES_TTL: Duration = Duration::from_secs(360);
/// Recorders kept (one per plugin and note that was recently written). When full, the ones
/// idle for [`SERIES_TTL`] go, then the least recently used: the next Event with its note
/// starts a new series, it never joins another note's.
const MAX_RECORDERS: usize = 10_000;
/// How an Event past the bound begins: client-go's words.
pub(crate) const COMBINED: &str = "(combined from similar events): ";

/// Which series an Event joins.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Series {
    /// The series of its own note (a new one for a new note).
    Note,
    /// The one series of the Events past the bound for its (object, type, reason, action).
    Combined,
}

/// (reporter, object, warning?, reason): [`EventType`] is not `Hash`.
type PeriodKey = (String, String, bool, String);

#[derive(Debug)]
struct Period {
    started: Instant,
    /// Digests of the distinct notes of this period, at most [`DISTINCT_NOTES`]. A digest
    /// collision only lets a new note count as seen (it stays its own Event: recorders are
    /// keyed by the note itself), so it cannot merge two notes.
    notes: Vec<u64>,
}

/// Counts distinct notes per (reporter, object, type, reason) in periods of
/// [`NOTE_WINDOW`]; decides each Event's [`Series`].
#[derive(Debug, Default)]
pub(crate) struct Aggregator {
    periods: HashMap<PeriodKey, Period>,
}

fn digest(note: &str) -> u64 {
    let mut h = DefaultHasher::new();
    note.hash(&mut h);
    h.finish()
}

impl Aggregator {
    /// The series of an Event with `note` from `reporter` about `object` at `now`.
    pub(crate) fn classify(
        &mut self,
        reporter: &str,
        object: &str,
        event_type: EventType,
        reason: &str,
        note: &str,
        now: Instant,
    ) -> Series {
        let key = (
            reporter.to_owned(),
            object.to_owned(),
            event_type == EventType::Warning,
            reason.to_owned(),
        );
        if !self.periods.contains_key(&key) && self.periods.len() >= MAX_PERIODS {
            self.make_room(now);
        }
        let period = self.periods.entry(key).or_insert(Period {
            started: now,
            notes: Vec::new(),
        });
        if now.saturating_duration_since(period.started) >= NOTE_WINDOW {
            *period = Period {
                started: now,
                notes: Vec::new(),
            };
        }
        let d = digest(note);
        if period.notes.contains(&d) {
            Series::Note
        } else if period.notes.len() < DISTINCT_NOTES {
            period.notes.push(d);
            Series::Note
        } else {
            Series::Combined
        }
    }

    /// Forgets the periods that ended; if none had, the oldest one (its key's next notes
    /// count afresh, which lets at most one more bound of distinct Events through).
    fn make_room(&mut self, now: Instant) {
        self.periods
            .retain(|_, p| now.saturating_duration_since(p.started) < NOTE_WINDOW);
        if self.periods.len() >= MAX_PERIODS
            && let Some(oldest) = self
                .periods
                .iter()
                .min_by_key(|(_, p)| p.started)
                .map(|(k, _)| k.clone())
        {
            self.periods.remove(&oldest);
        }
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.periods.len()
    }
}

/// kube-runtime [`Recorder`]s, one per reporter and note (and one per reporter for the
/// combined Events). The Recorder keys a series by reporter, object, type, reason and action
/// without the note; giving each note its own Recorder puts the note in that key, so repeats
/// of one note still patch one Event's `series` and two notes never share one.
pub(crate) struct Recorders {
    client: Client,
    recorders: HashMap<(String, Option<String>), (Recorder, Instant)>,
}

impl Recorders {
    /// No recorders yet; they will write through `client`.
    pub(crate) fn new(client: Client) -> Self {
        Self {
            client,
            recorders: HashMap::new(),
        }
    }

    /// The recorder for an Event of `reporter` with `note` joining `series`, used at `now`.
    pub(crate) fn get(
        &mut self,
        reporter: &str,
        note: &str,
        series: Series,
        now: Instant,
    ) -> Recorder {
        let key = (
            reporter.to_owned(),
            (series == Series::Note).then(|| note.to_owned()),
        );
        if !self.recorders.contains_key(&key) && self.recorders.len() >= MAX_RECORDERS {
            self.recorders
                .retain(|_, (_, used)| now.saturating_duration_since(*used) < SERIES_TTL);
            if self.recorders.len() >= MAX_RECORDERS
                && let Some(lru) = self
                    .recorders
                    .iter()
                    .min_by_key(|(_, (_, used))| *used)
                    .map(|(k, _)| k.clone())
            {
                self.recorders.remove(&lru);
            }
        }
        let client = &self.client;
        let (recorder, used) = self.recorders.entry(key).or_insert_with(|| {
            let recorder = Recorder::new(
                client.clone(),
                Reporter {
                    controller: reporter.to_owned(),
                    instance: std::env::var("POD_NAME").ok(),
                },
            );
            (recorder, now)
        });
        *used = now;
        recorder.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn classify(a: &mut Aggregator, reason: &str, note: &str, now: Instant) -> Series {
        a.classify(
            "wasmop/p",
            "v1/Pod/ns/o",
            EventType::Normal,
            reason,
            note,
            now,
        )
    }

    #[test]
    fn distinct_notes_stay_distinct_up_to_the_bound_then_combine() {
        let mut a = Aggregator::default();
        let t0 = Instant::now();
        for i in 0..DISTINCT_NOTES {
            assert_eq!(
                classify(&mut a, "Created", &format!("job {i}"), t0),
                Series::Note
            );
        }
        assert_eq!(classify(&mut a, "Created", "job 10", t0), Series::Combined);
        assert_eq!(classify(&mut a, "Created", "job 11", t0), Series::Combined);
        // A note seen in the period keeps its own series, past the bound too.
        assert_eq!(classify(&mut a, "Created", "job 3", t0), Series::Note);
        // The bound is per reason, type, object and reporter.
        assert_eq!(classify(&mut a, "Deleted", "job 10", t0), Series::Note);
        assert_eq!(
            a.classify(
                "wasmop/p",
                "v1/Pod/ns/other",
                EventType::Normal,
                "Created",
                "job 10",
                t0
            ),
            Series::Note
        );
        assert_eq!(
            a.classify(
                "wasmop/p",
                "v1/Pod/ns/o",
                EventType::Warning,
                "Created",
                "job 10",
                t0
            ),
            Series::Note
        );
        assert_eq!(
            a.classify(
                "wasmop/q",
                "v1/Pod/ns/o",
                EventType::Normal,
                "Created",
                "job 10",
                t0
            ),
            Series::Note
        );
    }

    #[test]
    fn repeats_of_one_note_never_use_up_the_bound() {
        let mut a = Aggregator::default();
        let t0 = Instant::now();
        for _ in 0..100 {
            assert_eq!(classify(&mut a, "Synced", "the same", t0), Series::Note);
        }
        for i in 1..DISTINCT_NOTES {
            assert_eq!(
                classify(&mut a, "Synced", &format!("n{i}"), t0),
                Series::Note
            );
        }
        assert_eq!(
            classify(&mut a, "Synced", "one too many", t0),
            Series::Combined
        );
    }

    #[test]
    fn a_new_period_starts_a_window_after_the_first_note_of_the_last() {
        let mut a = Aggregator::default();
        let t0 = Instant::now();
        for i in 0..=DISTINCT_NOTES {
            classify(&mut a, "Created", &format!("job {i}"), t0);
        }
        let almost = t0 + NOTE_WINDOW - Duration::from_secs(1);
        assert_eq!(
            classify(&mut a, "Created", "late", almost),
            Series::Combined
        );
        // Fixed, not sliding: a steady stream of new notes is not combined forever.
        let next = t0 + NOTE_WINDOW;
        for i in 0..DISTINCT_NOTES {
            assert_eq!(
                classify(&mut a, "Created", &format!("next {i}"), next),
                Series::Note
            );
        }
        assert_eq!(
            classify(&mut a, "Created", "next 10", next),
            Series::Combined
        );
    }

    #[test]
    fn the_aggregator_keeps_at_most_max_periods() {
        let mut a = Aggregator::default();
        let t0 = Instant::now();
        for i in 0..MAX_PERIODS + 5 {
            a.classify(
                "wasmop/p",
                &format!("o{i}"),
                EventType::Normal,
                "R",
                "n",
                t0,
            );
        }
        assert!(a.len() <= MAX_PERIODS, "{}", a.len());
        // Ended periods go first.
        let later = t0 + NOTE_WINDOW;
        a.classify("wasmop/p", "fresh", EventType::Normal, "R", "n", later);
        assert_eq!(a.len(), 1);
    }
}

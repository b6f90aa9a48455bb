"""The suspect-mode race (ppl.inference.race): the second start's solve stops once its recent
gains cannot close the gap to the first start's optimum on the shared first draws, and not
before. The rule against traces whose answer is known by arithmetic."""

from __future__ import annotations

from ppl.inference.race import WINDOW, Race, Rival


def _fed(values) -> Rival:
    rival = Rival(mark=0.0)
    for evaluations, value in values:
        rival.seen(value, evaluations)
    return rival


def test_a_solve_standing_still_far_below_the_mark_is_hopeless():
    """1,000 nats below and gaining 0.1 nat per WINDOW evaluations: 500 more cannot close it."""
    rival = _fed((e, -1000.0 + 0.1 * e / WINDOW) for e in range(WINDOW + 1))
    assert rival.hopeless(left=500)
    assert rival.stopped and rival.hopeless(left=10**9)  # once stopped, it stays stopped


def test_a_solve_that_can_still_make_up_the_gap_goes_on():
    """Gaining 5 nats per evaluation, 320 nats below: 500 evaluations at that pace make 2,500."""
    rival = _fed((e, -1000.0 + 5.0 * e) for e in range(WINDOW + 73))
    assert not rival.hopeless(left=500)
    # the same pace with only 50 evaluations left (250 nats) cannot close 320
    assert rival.hopeless(left=50)


def test_no_verdict_before_a_whole_window_nor_above_the_mark():
    assert not _fed((e, -1000.0) for e in range(WINDOW - 1)).hopeless(left=1)
    assert not _fed((e, 5.0) for e in range(2 * WINDOW)).hopeless(left=1)  # above the mark


def test_a_drop_in_the_value_starts_a_new_window():
    """L-BFGS never goes down: a lower value is a new objective (control variates re-based at a
    natural-gradient restart; eight schools' +2.8e12 fell back to -92): the window restarts."""
    trace = [(e, -1000.0 + 20.0 * e) for e in range(WINDOW)] + [(WINDOW, -5000.0)]
    rival = _fed(trace + [(WINDOW + 1 + e, -5000.0) for e in range(WINDOW - 2)])
    assert not rival.hopeless(left=1)  # the new objective's trace is shorter than a window
    rival.seen(-5000.0, 2 * WINDOW + 1)
    assert rival.hopeless(left=1000)


def test_the_race_only_watches_the_first_round_and_stops_on_the_budget_too():
    counter = {"evals": 0}
    rival = Rival(mark=0.0)
    race = Race(rival, counter, draws=8, max_iter=1000, max_evals=None)
    rounds: list = []
    stop = race.stop(lambda: False, rounds)
    for k in range(WINDOW + 1):
        counter["evals"] = 8 * k
        race.seen(k, -1000.0, rounds)
    assert stop() and race.lost
    # a second round is not raced; the budget still stops it
    later = Race(Rival(mark=0.0), counter, draws=8, max_iter=1000, max_evals=None)
    assert not later.stop(lambda: False, [{"draws": 8}])()
    assert later.stop(lambda: True, [{"draws": 8}])()
    assert not Race(None, counter, 8, 1000, None).lost

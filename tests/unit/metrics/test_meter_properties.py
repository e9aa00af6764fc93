from hypothesis import given
from hypothesis import strategies as st

from kmirror.metrics.meter import TICK_INTERVAL_MS, Meter
from kmirror.ports import ManualClock

steps = st.lists(st.tuples(st.integers(0, 3 * TICK_INTERVAL_MS), st.integers(0, 1000)), max_size=60)


@given(steps)
def test_count_is_the_sum_of_marks_and_rates_stay_within_bounds(events: list[tuple[int, int]]) -> None:
    clock = ManualClock()
    meter = Meter(clock)
    for advance_ms, n in events:
        clock.advance(advance_ms)
        meter.mark(n)
    assert meter.count == sum(n for _, n in events)
    # an EWMA never exceeds the largest instant rate it was fed (events of one tick / tick length)
    bound = meter.count * 1000 / TICK_INTERVAL_MS
    for rate in (meter.one_minute_rate(), meter.five_minute_rate(), meter.fifteen_minute_rate()):
        assert 0 <= rate <= bound + 1e-9


@given(steps, st.integers(1, 60))
def test_idle_minutes_only_lower_the_rates(events: list[tuple[int, int]], idle_minutes: int) -> None:
    clock = ManualClock()
    meter = Meter(clock)
    for advance_ms, n in events:
        clock.advance(advance_ms)
        meter.mark(n)
    clock.advance(TICK_INTERVAL_MS + 1)  # fold in the last tick's events
    before = (meter.one_minute_rate(), meter.five_minute_rate(), meter.fifteen_minute_rate())
    clock.advance(idle_minutes * 60_000)
    after = (meter.one_minute_rate(), meter.five_minute_rate(), meter.fifteen_minute_rate())
    assert all(a <= b + 1e-12 for a, b in zip(after, before, strict=True))

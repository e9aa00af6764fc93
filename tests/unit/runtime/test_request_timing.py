from kmirror.runtime.request_timing import RequestClock


def test_a_requests_time_splits_into_kafkas_parts_that_add_up_to_the_total() -> None:
    ms = 1_000_000
    clock = RequestClock(received_ns=100 * ms, started_ns=103 * ms)  # 3 ms behind earlier requests
    clock.remote_ns = 500 * ms  # a long-poll Fetch's wait
    clock.throttle_ns = 20 * ms
    clock.ready_ns = 103 * ms + 2 * ms + 500 * ms + 20 * ms  # 2 ms of handling and encoding
    times = clock.times_ms(write_started_ns=clock.ready_ns + 1 * ms, written_ns=clock.ready_ns + 1 * ms + ms // 4)
    assert (times.queue, times.local, times.remote, times.throttle) == (3.0, 2.0, 500.0, 20.0)
    assert (times.response_queue, times.response_send) == (1.0, 0.25)
    assert times.total == times.queue + times.local + times.remote + times.throttle \
        + times.response_queue + times.response_send == 526.25


def test_a_request_answered_with_nothing_ends_when_it_is_handled() -> None:
    clock = RequestClock(received_ns=0, started_ns=0, ready_ns=4_000_000)
    times = clock.times_ms(clock.ready_ns, clock.ready_ns)
    assert (times.local, times.response_queue, times.response_send, times.total) == (4.0, 0.0, 0.0, 4.0)

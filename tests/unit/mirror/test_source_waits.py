"""How long the data plane's passes wait on a source (`kmirror.mirror.source_waits`)."""

from __future__ import annotations

import asyncio
import gc

import pytest

from kmirror.mirror.source_waits import SourceWaitAbandoned, SourceWaits

GRACE = 0.05


async def answer_after(seconds: float, value: object = "answer") -> object:
    await asyncio.sleep(seconds)
    return value


def test_without_an_operator_waiting_a_question_waits_for_its_answer() -> None:
    async def go() -> object:
        waits = SourceWaits(GRACE)
        waits.start_pass(failing_over=False)
        return await waits.call(answer_after(4 * GRACE))

    assert asyncio.run(go()) == "answer"


def test_a_pass_with_partitions_to_fail_over_gives_up_on_each_question_after_the_grace() -> None:
    async def go() -> None:
        waits = SourceWaits(GRACE)
        waits.start_pass(failing_over=True)
        assert await waits.call(answer_after(0)) == "answer"  # a prompt answer still counts
        with pytest.raises(SourceWaitAbandoned):  # an hour's request
            await waits.call(answer_after(3600))
        assert waits.abandoned == 1
        waits.start_pass(failing_over=False)
        assert await waits.call(answer_after(2 * GRACE)) == "answer"

    asyncio.run(go())


def test_a_newer_image_cuts_short_the_questions_in_flight_and_the_later_ones() -> None:
    async def go() -> None:
        waits = SourceWaits(GRACE)
        waits.start_pass(failing_over=False)
        in_flight = asyncio.ensure_future(waits.call(answer_after(3600)))
        await asyncio.sleep(2 * GRACE)
        assert not in_flight.done()  # nobody waits: it would wait for the request's timeout
        waits.newer_image()
        with pytest.raises(SourceWaitAbandoned):
            await in_flight
        with pytest.raises(SourceWaitAbandoned):
            await waits.call(answer_after(3600))

    asyncio.run(go())


def test_a_late_failure_of_an_abandoned_question_is_consumed() -> None:
    """The request is not cancelled: it ends by its own timeout, and nothing is left unretrieved."""
    timed_out = asyncio.Event()

    async def fails_late() -> object:
        await timed_out.wait()
        raise ConnectionError("request timed out")

    unretrieved: list[object] = []

    async def go() -> None:
        asyncio.get_running_loop().set_exception_handler(lambda loop, context: unretrieved.append(context))
        waits = SourceWaits(GRACE)
        waits.start_pass(failing_over=True)
        request = asyncio.ensure_future(fails_late())
        with pytest.raises(SourceWaitAbandoned):
            await waits.call(request)
        assert not request.done()  # not cancelled: it runs on
        timed_out.set()
        await asyncio.wait([request])
        del request

    asyncio.run(go())
    gc.collect()
    assert unretrieved == []

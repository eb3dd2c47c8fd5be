"""The process-wide bounded pool of the service's Arrow connections (gluon.reuse.SharedPool):
never more than its size, the same object again to a thread that holds one, a broken one
closed and replaced, a borrower waiting for a free one and giving up after its wait."""

from __future__ import annotations

import threading

import pytest

from gluon.reuse import SharedPool


class Made:
    def __init__(self) -> None:
        self.made: list[int] = []
        self.closed: list[int] = []

    def make(self) -> int:
        self.made.append(len(self.made) + 1)
        return self.made[-1]

    def close(self, item: int) -> None:
        self.closed.append(item)


def test_a_thread_borrowing_again_gets_the_one_it_holds() -> None:
    made = Made()
    pool = SharedPool(made.make, made.close, 1)
    with pool.borrow(1) as outer, pool.borrow(1) as inner:
        assert inner == outer
    with pool.borrow(1) as again:
        assert again == outer
    assert made.made == [1]


def test_never_more_than_its_size_and_a_waiter_gets_the_one_given_back() -> None:
    made = Made()
    pool = SharedPool(made.make, made.close, 2)
    holding, release = threading.Barrier(3), threading.Event()
    got: list[int] = []

    def hold() -> None:
        with pool.borrow(5) as item:
            got.append(item)
            holding.wait()
            release.wait(5)

    holders = [threading.Thread(target=hold) for _ in range(2)]
    for holder in holders:
        holder.start()
    holding.wait()
    with pytest.raises(TimeoutError), pool.borrow(0.1):
        pass
    release.set()
    with pool.borrow(5) as item:
        assert item in got
    for holder in holders:
        holder.join()
    assert sorted(made.made) == [1, 2]


def test_one_whose_use_raised_is_closed_and_made_anew() -> None:
    made = Made()
    pool = SharedPool(made.make, made.close, 1)
    with pytest.raises(RuntimeError), pool.borrow(1):
        raise RuntimeError("the server went away")
    assert made.closed == [1]
    with pool.borrow(1) as item:
        assert item == 2
    pool.close()
    assert made.closed == [1, 2]

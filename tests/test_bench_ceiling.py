"""The ingest bench's ceiling: what the CPU an ingest used allows its ratio to reach on the cores.

The bench prints it beside every measured ratio (bench/ingest.py), so a reader can tell a
target the code misses from one the machine cannot reach; these tests pin its three bounds
and the reading of the PostgreSQL server's CPU it needs.
"""

from __future__ import annotations

import psycopg
import pytest
from databases import _admin_conninfo, pg_base_url

from bench.ingest import ceiling, local_server, server_cpu, server_cpu_since


def test_every_core_busy_bounds_it_when_no_one_process_is_longer() -> None:
    # 3.4 s of CPU on two cores cannot take less than 1.7 s: a 1.19 s bare insert is 0.7x of that
    assert ceiling(bare_wall=1.19, writer=0.6, total=3.4, server=1.1, cores=2) == pytest.approx(0.7)


def test_the_writer_thread_bounds_it_when_it_alone_takes_longer() -> None:
    # the writer's 1.8 s in order is longer than the 3.4 s shared by two cores
    assert ceiling(bare_wall=1.35, writer=1.8, total=3.4, server=None, cores=2) == pytest.approx(0.75)


def test_the_server_bounds_it_when_its_one_backend_takes_longer() -> None:
    assert ceiling(bare_wall=1.0, writer=0.5, total=2.4, server=2.0, cores=4) == pytest.approx(0.5)


def test_more_cores_raise_it_until_one_process_bounds_it() -> None:
    two = ceiling(bare_wall=1.15, writer=0.6, total=3.4, server=1.1, cores=2)
    four = ceiling(bare_wall=1.15, writer=0.6, total=3.4, server=1.1, cores=4)
    assert two < four == pytest.approx(1.15 / 1.1)


@pytest.mark.postgres
def test_the_local_servers_cpu_counts_a_backends_work() -> None:
    """The bench reads the server's CPU from /proc while the backend that did the work lives."""
    before = server_cpu()
    assert before, "no process named postgres found in /proc (the tests' server runs on this machine)"
    with psycopg.connect(_admin_conninfo(pg_base_url()), autocommit=True) as conn:
        conn.execute("SELECT count(*) FROM generate_series(1, 3000000)").fetchone()
        used = server_cpu_since(before)
    assert used is not None and used >= 0.05  # a few hundred ms of one backend's work, in 10 ms ticks
    assert server_cpu_since(None) is None


def test_only_a_server_on_this_machine_has_its_cpu_read() -> None:
    assert local_server("postgresql+psycopg://postgres@127.0.0.1:5432/test")
    assert local_server("postgresql+psycopg://postgres@localhost/test")
    assert local_server("postgresql+psycopg:///test?host=/var/run/postgresql")
    assert not local_server("postgresql+psycopg://postgres@db.example.org:5432/test")

"""`free_port_block` hands out port blocks no other process on the machine holds."""

from __future__ import annotations

import subprocess
import sys
import textwrap

from kmirror.testing.processes import PORT_RANGE, free_port_block

RESERVE = textwrap.dedent("""
    import sys
    from kmirror.testing.processes import free_port_block, _reserved
    for _ in range(150):
        free_port_block(3)
    print(" ".join(map(str, sorted(_reserved))), flush=True)
    sys.stdin.read()  # hold the reservations until the parent has read both lists
""")


def test_concurrent_processes_never_share_a_port() -> None:
    procs = [subprocess.Popen([sys.executable, "-c", RESERVE], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
             for _ in range(2)]
    try:
        held = [set(map(int, p.stdout.readline().split())) for p in procs]  # type: ignore[union-attr]
    finally:
        for p in procs:
            p.communicate("")
    assert len(held[0]) == len(held[1]) == 150 * 7
    assert not held[0] & held[1]


def test_a_block_covers_brokers_and_controller_ports_inside_the_reserved_range() -> None:
    port = free_port_block(3)
    assert port in PORT_RANGE and port + 103 < PORT_RANGE.stop

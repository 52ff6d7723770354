"""The reset's socket check (server/state/reset.py inet_sockets): the namespace's counters
spare reading the socket tables only when they count nothing, and any doubt (a counter
missing, unreadable, or not zero) reads the tables."""

from __future__ import annotations

from pathlib import Path

import pytest

from cowork.server.state.reset import inet_sockets

EMPTY4 = """sockets: used 1
TCP: inuse 0 orphan 0 tw 0 alloc 1 mem 145
UDP: inuse 0 mem 0
UDPLITE: inuse 0
RAW: inuse 0
FRAG: inuse 0 memory 0
"""
EMPTY6 = "TCP6: inuse 0\nUDP6: inuse 0\nUDPLITE6: inuse 0\nRAW6: inuse 0\nFRAG6: inuse 0 memory 0\n"
HEADER = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n"
LISTENER = "   0: 0100007F:1092 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 1 1\n"


def _proc(tmp_path: Path, sockstat: str | None, sockstat6: str | None, tcp: str = "") -> Path:
    for name, text in (("sockstat", sockstat), ("sockstat6", sockstat6)):
        if text is not None:
            (tmp_path / name).write_text(text)
    for table in ("tcp", "tcp6", "udp", "udp6", "raw", "raw6"):
        (tmp_path / table).write_text(HEADER + (tcp if table == "tcp" else ""))
    return tmp_path


def test_counters_at_zero_spare_the_tables(tmp_path: Path) -> None:
    # The table holds an entry the counters do not count: only possible in this fake, and it
    # shows the tables were not read.
    assert inet_sockets(str(_proc(tmp_path, EMPTY4, EMPTY6, LISTENER))) == []


@pytest.mark.parametrize("counter", ["TCP: inuse 1", "tw 3", "UDP: inuse 2", "RAW: inuse 1"])
def test_a_counted_socket_reads_the_tables(tmp_path: Path, counter: str) -> None:
    key = counter.split(":")[0] + ":" if ":" in counter else "TCP:"
    text = EMPTY4
    if counter.startswith("tw"):
        text = text.replace("tw 0", counter)
    else:
        text = text.replace(f"{key} inuse 0", counter, 1)
    assert text != EMPTY4
    assert inet_sockets(str(_proc(tmp_path, text, EMPTY6, LISTENER))) == ["tcp 0100007F:1092 00000000:0000 0A"]


@pytest.mark.parametrize("v6", ["TCP6: inuse 1", "UDP6: inuse 1", "RAW6: inuse 1"])
def test_a_counted_v6_socket_reads_the_tables(tmp_path: Path, v6: str) -> None:
    text = EMPTY6.replace(v6.replace("1", "0"), v6)
    assert inet_sockets(str(_proc(tmp_path, EMPTY4, text, LISTENER))) != []


@pytest.mark.parametrize("s4, s6", [(None, EMPTY6), (EMPTY4, None), ("garbage", EMPTY6),
                                    (EMPTY4.replace("tw 0 ", ""), EMPTY6), (EMPTY4, "TCP6: inuse x\n"),
                                    (EMPTY4, EMPTY6.replace("RAW6: inuse 0\n", ""))])
def test_a_counter_in_doubt_reads_the_tables(tmp_path: Path, s4: str | None, s6: str | None) -> None:
    assert inet_sockets(str(_proc(tmp_path, s4, s6, LISTENER))) != []

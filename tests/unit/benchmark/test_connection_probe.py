"""What the connection probe reads from /proc: the resident set size and the open sockets."""

from __future__ import annotations

import os
import socket

import pytest

from barnabas.benchmark._connection_probe import _read, rss_kib, socket_count

STATUS = """Name:\tpython
VmPeak:\t  300000 kB
VmHWM:\t   61000 kB
VmRSS:\t   52296 kB
RssAnon:\t   40000 kB
"""


def test_rss_is_the_vmrss_line_not_the_high_water_mark() -> None:
    assert rss_kib(STATUS) == 52296


def test_a_status_without_rss_is_an_error() -> None:
    with pytest.raises(ValueError, match="no VmRSS"):
        rss_kib("Name:\tkthreadd\nState:\tS (sleeping)\n")
    with pytest.raises(ValueError, match="expected kB"):
        rss_kib("VmRSS:\t 12 MB\n")


def test_only_socket_descriptors_count() -> None:
    targets = ["/dev/null", "socket:[1234]", "pipe:[99]", "socket:[1235]", "anon_inode:[eventpoll]"]
    assert socket_count(targets) == 2


def test_reading_this_process_sees_a_socket_it_opens() -> None:
    rss, sockets = _read(os.getpid())
    assert rss > 1000  # a Python process with pytest loaded: well over a megabyte
    with socket.socket() as extra:
        assert extra.fileno() >= 0
        assert _read(os.getpid())[1] == sockets + 1

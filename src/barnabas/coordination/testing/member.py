"""A process that joins a group (and optionally runs for an election), then waits to be killed.

The contract checks run it as a real subprocess and kill it with SIGKILL, because only a dead
process proves that a backend notices death without the process's cooperation:

    python -m barnabas.coordination.testing.member URL GROUP MEMBER TTL [--elect NAME]

It prints ``ready <session id> <granted ttl> [<epoch>]`` once joined (and elected), then
``state <name>`` on every change of its session's state (a paused member, resumed, must report
``state lost``), and otherwise sleeps. With ``--rejoin`` it joins again at once whenever its session
is lost, as a broker registers again, with a new session and the data ``again``, and prints
``rejoined <session id>``.
"""

from __future__ import annotations

import argparse
import asyncio
import sys

from ..election import LeaderElection
from ..membership import GroupMembership
from ..registry import open_metastore
from ..session_end import wait_until_lost


async def _main(args: argparse.Namespace) -> None:
    metastore = await open_metastore(args.url)
    session = await metastore.open_session(args.ttl)
    await GroupMembership(metastore, args.group).join(session, args.member, b"pid")
    line = f"ready {session.id} {session.ttl_s}"
    if args.elect:
        fence = await LeaderElection(metastore, args.elect).nominate(session, args.member)
        line += f" {fence.epoch}"
    session.add_state_listener(lambda state: print(f"state {state.value}", flush=True))
    print(line, flush=True)
    if not args.rejoin:
        await asyncio.Event().wait()
    group = GroupMembership(metastore, args.group)
    while True:
        await wait_until_lost(session)
        session = await metastore.open_session(args.ttl)
        await group.join(session, args.member, b"again")
        print(f"rejoined {session.id}", flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("url")
    parser.add_argument("group")
    parser.add_argument("member")
    parser.add_argument("ttl", type=float)
    parser.add_argument("--elect", metavar="NAME", help="also run for this election and wait to win")
    parser.add_argument("--rejoin", action="store_true", help="join again with a new session whenever it is lost")
    args = parser.parse_args(argv)
    asyncio.run(_main(args))
    return 0


if __name__ == "__main__":
    sys.exit(main())

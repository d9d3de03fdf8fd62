"""`python -m workers.ping`: send a ping task through the configured broker and print the
reply as JSON; exit 1 when no worker answers in time.

A quick check that a worker is up and wired to the same broker as this machine's settings.
"""

import argparse
import json
import sys

from celery.exceptions import TimeoutError

from workers.tasks import ping


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--timeout", type=float, default=30.0, help="seconds to wait (30)")
    parser.add_argument("--queue", default="cpu", help="queue to send the ping to (cpu)")
    args = parser.parse_args()
    result = ping.apply_async(queue=args.queue)
    try:
        reply = result.get(timeout=args.timeout)
    except TimeoutError:
        sys.exit(f"No worker answered on queue {args.queue!r} within {args.timeout:g} s.")
    print(json.dumps(reply))


if __name__ == "__main__":
    main()

"""The ``fetcher`` command (contract §1.5): run | demo | derive-key | generate-master-key, and
the client commands (events, result, jobs)."""

from __future__ import annotations

import os
import sys

__all__ = ["main"]

USAGE = """\
usage: fetcher <command> [options]

commands:
  run                   start the component FETCHER_MODE selects (manager, worker, embedded)
  demo [--keep]         run the embedded demonstration end to end
  derive-key            print the external HMAC key (or --purpose storage) of APP_ENC_KEY
  generate-master-key   print a new random master key
  dev-token             print an HS256 bearer token signed with AUTH_JWT_SECRET (--sub, --scope)
  events tail           follow job events: verify, deduplicate, print (--json, --feed URL)
  result get <id|key>   download, verify and decrypt a result (-o FILE)
  jobs list             list and search jobs (--status failed --since 1h; --json)
"""


def main(argv: list[str] | None = None) -> int:  # noqa: PLR0911 - one dispatch per command
    args = sys.argv[1:] if argv is None else argv
    if not args or args[0] in ("-h", "--help"):
        (sys.stdout if args else sys.stderr).write(USAGE)
        return 0 if args else 1
    command, rest = args[0], args[1:]
    if command == "derive-key":
        from fetcher.cli.keys import derive_key_command

        return derive_key_command(rest, dict(os.environ))
    if command == "generate-master-key":
        from fetcher.cli.keys import generate_master_key_command

        return generate_master_key_command(rest)
    if command == "dev-token":
        from fetcher.cli.dev_token import dev_token_command

        return dev_token_command(rest, dict(os.environ))
    if command == "run":
        from fetcher.cli.run import run_command

        return run_command(rest, dict(os.environ))
    if command == "demo":
        from fetcher.cli.demo import demo_command

        return demo_command(rest, dict(os.environ))
    if command == "events":
        from fetcher.cli.events import events_command

        return events_command(rest, dict(os.environ))
    if command == "jobs":
        from fetcher.cli.jobs import jobs_command

        return jobs_command(rest, dict(os.environ))
    if command == "result":
        from fetcher.cli.result import result_command

        return result_command(rest, dict(os.environ))
    sys.stderr.write(USAGE)
    return 1

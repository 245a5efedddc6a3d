"""The ``fetcher`` command (contract §1.5): run | migrate | demo | derive-key |
generate-master-key, and the client commands (events, result, jobs).

``fetcher --version`` prints ``fetcher <version>``; ``fetcher``, ``-h`` or ``--help`` print the
command list (exit 0 when asked for, 2 when no command was given); an unknown command is named
on stderr with the list, exit 2 (argparse's usage-error code, as every subcommand's own
option errors).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Mapping

from fetcher import __version__
from fetcher.cli.terminal import printable

__all__ = ["main"]

EXIT_USAGE = 2

USAGE = """\
usage: fetcher <command> [options]      (fetcher <command> --help: that command's options)

commands:
  run                   start the component FETCHER_MODE selects (manager, worker, embedded)
  migrate [--check]     apply the metadata store's migrations (DATABASE_URL) and exit
  demo [--keep]         run the embedded demonstration end to end
  derive-key            print the external HMAC key (or --purpose storage) of APP_ENC_KEY
  generate-master-key   print a new random master key
  rotate-credentials    re-encrypt stored credentials under the current APP_ENC_KEY
  dev-token             print an HS256 bearer token signed with AUTH_JWT_SECRET (--sub, --scope)
  events tail           follow job events: verify, deduplicate, print (--json, --feed URL)
  result get <id|key>   download, verify and decrypt a result (-o FILE)
  jobs list             list and search jobs (--status failed --since 1h; --json)
  jobs cancel <jobId>   cancel a pending or processing job (§14.4)
  jobs retry <jobId>    submit a failed or canceled job again (§14.5)

options:
  -h, --help            this list
  --version             print the version
"""

Command = Callable[[list[str], dict[str, str]], int]


def _derive_key(argv: list[str], env: dict[str, str]) -> int:
    from fetcher.cli.keys import derive_key_command

    return derive_key_command(argv, env)


def _generate_master_key(argv: list[str], env: dict[str, str]) -> int:
    from fetcher.cli.keys import generate_master_key_command

    return generate_master_key_command(argv)


def _rotate_credentials(argv: list[str], env: dict[str, str]) -> int:
    from fetcher.cli.rotate import rotate_credentials_command

    return rotate_credentials_command(argv, env)


def _dev_token(argv: list[str], env: dict[str, str]) -> int:
    from fetcher.cli.dev_token import dev_token_command

    return dev_token_command(argv, env)


def _run(argv: list[str], env: dict[str, str]) -> int:
    from fetcher.cli.run import run_command

    return run_command(argv, env)


def _migrate(argv: list[str], env: dict[str, str]) -> int:
    from fetcher.cli.migrate import migrate_command

    return migrate_command(argv, env)


def _demo(argv: list[str], env: dict[str, str]) -> int:
    from fetcher.cli.demo import demo_command

    return demo_command(argv, env)


def _events(argv: list[str], env: dict[str, str]) -> int:
    from fetcher.cli.events import events_command

    return events_command(argv, env)


def _jobs(argv: list[str], env: dict[str, str]) -> int:
    from fetcher.cli.jobs import jobs_command

    return jobs_command(argv, env)


def _result(argv: list[str], env: dict[str, str]) -> int:
    from fetcher.cli.result import result_command

    return result_command(argv, env)


#: Each command's module is imported only when it runs (the CLI starts fast).
COMMANDS: Mapping[str, Command] = {
    "run": _run,
    "migrate": _migrate,
    "demo": _demo,
    "derive-key": _derive_key,
    "generate-master-key": _generate_master_key,
    "rotate-credentials": _rotate_credentials,
    "dev-token": _dev_token,
    "events": _events,
    "result": _result,
    "jobs": _jobs,
}


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if not args:
        sys.stderr.write(USAGE)
        return EXIT_USAGE
    if args[0] in ("-h", "--help"):
        sys.stdout.write(USAGE)
        return 0
    if args[0] in ("-V", "--version"):
        sys.stdout.write(f"fetcher {__version__}\n")
        return 0
    command = COMMANDS.get(args[0])
    if command is None:
        shown = printable(args[0], max_chars=100)
        sys.stderr.write(f"fetcher: unknown command '{shown}'\n\n{USAGE}")
        return EXIT_USAGE
    return command(args[1:], dict(os.environ))

"""``oasis certs create --dir DIR --names NAME,...``: the audit webhook's certificates in one command
(decision 0114), instead of a page of openssl: a CA of its own, the receiver's serving certificate for
NAMES, and the API server's client certificate, all signed by that CA (docs/kind.md, step 1).

Called by :mod:`oasis_operator.cli.main`; the keys come from
:func:`oasis_operator.devcluster.certs.generate_webhook_pki` (the ``devcluster`` extra, cryptography).
"""

from __future__ import annotations

import argparse
import datetime as dt
from pathlib import Path

from oasis_operator.cli.main import CliError
from oasis_operator.devcluster.certs import WEBHOOK_FILES, generate_webhook_pki
from oasis_operator.devcluster.errors import SetupError

EPILOG = """\
files written (private keys readable only by you):
  ca.crt, ca.key          the CA (trusted by the receiver for clients, by the API server for the receiver)
  tls.crt, tls.key        the receiver's serving certificate: every NAME as a subject alternative name
  client.crt, client.key  the API server's client certificate (CN kube-apiserver-audit)

examples:
  oasis certs create --dir .kind/audit-pki --names 10.96.0.250,oasis-operator-audit.oasis-system.svc
"""


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    certs = sub.add_parser(
        "certs",
        help="create the audit webhook's certificates (a CA, a serving and a client certificate)",
        epilog="examples:\n  oasis certs create --dir .kind/audit-pki --names 10.96.0.250,audit.example.svc",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    actions = certs.add_subparsers(dest="action", metavar="ACTION")
    actions.required = True
    create = actions.add_parser(
        "create",
        help="write a CA, a serving certificate for NAMES and a client certificate into DIR",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    create.add_argument("--dir", type=Path, required=True, metavar="DIR", help="where to write the files")
    create.add_argument(
        "--names",
        required=True,
        metavar="NAME,...",
        help="the serving certificate's names: IP addresses and DNS names, comma-separated",
    )
    create.add_argument(
        "--client-name", default="kube-apiserver-audit", help="the client certificate's common name"
    )
    create.add_argument("--days", type=int, default=365, help="validity in days (default 365)")
    create.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    names = tuple(n.strip() for n in str(args.names).split(",") if n.strip())
    if not names:
        raise CliError(f"--names {args.names!r}: expected IP addresses or DNS names, comma-separated")
    if args.days < 1:
        raise CliError(f"--days {args.days}: expected a positive number of days")
    try:
        generate_webhook_pki(
            args.dir, dt.datetime.now(dt.UTC), names, client_name=args.client_name, days=args.days
        )
    except SetupError as exc:
        raise CliError(str(exc)) from None
    except OSError as exc:
        raise CliError(f"{args.dir}: cannot write the certificates: {exc.strerror or exc}") from None
    print(
        f"wrote {', '.join(WEBHOOK_FILES)} in {args.dir} (valid {args.days} days; names: {', '.join(names)})"
    )
    return 0

"""`gpupolicy certs generate`: a CA and a serving certificate for `<service>.<namespace>.svc`.

Lifetimes match the chart's self-signed mode (certs.selfSigned): a 180-day serving certificate
from a 10-year CA. `--ca DIR` keeps the CA apart from what goes into the serving Secret, and
signs with the CA already there: renewing then leaves the caBundle as it is.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
from pathlib import Path
from typing import TextIO

from webhook import certs

SERVING_DAYS = 180  # charts/gpupolicy values: certs.selfSigned.certValidityDays
CA_DAYS = 3650  # certs.selfSigned.caValidityDays


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    gen = sub.add_parser("generate", help="write tls.crt, tls.key and ca.crt (and the CA's key)")
    gen.add_argument("--service", default="gpupolicy", help="Service name (default: gpupolicy)")
    gen.add_argument("--namespace", default="gpupolicy", help="its namespace (default: gpupolicy)")
    gen.add_argument("--out", default="certs", help="output directory (default: certs)")
    gen.add_argument("--days", type=int, default=SERVING_DAYS,
                     help=f"serving certificate lifetime (default: {SERVING_DAYS})")
    gen.add_argument("--ca", metavar="DIR",
                     help="where the CA is kept (ca.crt, ca.key): signed with the one there, "
                          "else a new one is written there (default: --out; keep it apart "
                          "from what goes into the Secret)")
    gen.add_argument("--ca-days", type=int, default=CA_DAYS,
                     help=f"lifetime of a new CA (default: {CA_DAYS})")


def run(args: argparse.Namespace, stdout: TextIO, stderr: TextIO) -> int:
    for name in ("days", "ca_days"):
        if getattr(args, name) < 1:
            stderr.write(f"gpupolicy certs: --{name.replace('_', '-')} must be at least 1\n")
            return 2
    ca_dir = Path(args.ca or args.out)
    try:
        ca = certs.load_ca(ca_dir)
    except (OSError, ValueError) as exc:
        stderr.write(f"gpupolicy certs: cannot use the CA: {exc}\n")
        return 2
    made = ca is None
    if ca is None:
        ca = certs.build_ca(days=args.ca_days)
    ends = dt.datetime.now(dt.UTC) + dt.timedelta(days=args.days)
    if ends > ca.cert.not_valid_after_utc:
        stderr.write(f"gpupolicy certs: the CA in {ca_dir} ends "
                     f"{ca.cert.not_valid_after_utc:%Y-%m-%d}, before a {args.days}-day "
                     f"certificate would; make a new CA (and caBundle) first\n")
        return 2
    try:
        bundle = certs.build_serving_cert(args.service, args.namespace, ca, days=args.days)
        paths = certs.write_bundle(dataclasses.replace(bundle, ca_key_pem=b""), args.out)
        if made:
            paths["ca_key"] = certs.write_ca(ca, ca_dir)["ca_key"]
    except OSError as exc:
        stderr.write(f"gpupolicy certs: cannot write {exc.filename or args.out}: "
                     f"{exc.strerror or exc}\n")
        return 2
    names = ", ".join(certs.service_names(args.service, args.namespace))
    stdout.write(f"serving certificate for {names}, valid {args.days} days "
                 f"({'a new' if made else 'the existing'} CA in {ca_dir})\n")
    for role, path in paths.items():
        stdout.write(f"  {role}: {path}\n")
    stdout.write(f"caBundle for the webhook configuration: base64 of {paths['ca']}\n")
    return 0

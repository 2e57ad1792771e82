"""`gpupolicy certs generate`: a CA and a serving certificate for `<service>.<namespace>.svc`."""

from __future__ import annotations

import argparse
from typing import TextIO

from webhook.certs import build_ca, build_serving_cert, service_names, write_bundle


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    gen = sub.add_parser("generate", help="write ca.crt, tls.crt, tls.key (and ca.key)")
    gen.add_argument("--service", default="gpupolicy", help="Service name (default: gpupolicy)")
    gen.add_argument("--namespace", default="gpupolicy", help="its namespace (default: gpupolicy)")
    gen.add_argument("--out", default="certs", help="output directory (default: certs)")
    gen.add_argument("--days", type=int, default=365, help="serving cert lifetime (default: 365)")


def run(args: argparse.Namespace, stdout: TextIO, stderr: TextIO) -> int:
    if args.days < 1:
        stderr.write("gpupolicy certs: --days must be at least 1\n")
        return 2
    try:
        bundle = build_serving_cert(args.service, args.namespace, build_ca(), days=args.days)
        paths = write_bundle(bundle, args.out)
    except OSError as exc:
        stderr.write(f"gpupolicy certs: cannot write {args.out}: {exc}\n")
        return 2
    names = ", ".join(service_names(args.service, args.namespace))
    stdout.write(f"serving certificate for {names}\n")
    for role, path in paths.items():
        stdout.write(f"  {role}: {path}\n")
    stdout.write(f"caBundle for the webhook configuration: base64 of {paths['ca']}\n")
    return 0

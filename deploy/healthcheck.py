"""Container health check: is the coordinator's gRPC health service SERVING?

The image's ``HEALTHCHECK`` (``deploy/Dockerfile``) and the coordinator services of
``docker-compose.yml`` run ``python -m privfed.deploy.healthcheck``: one ``grpc.health.v1``
``Check`` call with the ``HEALTH_TIMEOUT`` deadline over mTLS. The coordinator requires a client
certificate from the federation CA, so the check presents the certificate ``--name`` from
``--certs`` (default ``coordinator``: the coordinator's own, which needs the clientAuth usage;
see ``deploy/certs.py``). Exit status 0 when SERVING, 1 otherwise (Docker's convention).

Defaults come from ``PRIVFED_HEALTH_TARGET`` (127.0.0.1:50051), ``PRIVFED_CERTS`` (/certs) and
``PRIVFED_HEALTH_NAME`` (coordinator), so the image's bare ``HEALTHCHECK`` line needs no arguments.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from privfed.proto.transport import HEALTH_TIMEOUT, TlsFiles, channel_credentials, channel_options


def check(target: str, *, tls: TlsFiles | None, service: str = "", target_name: str | None = None) -> str:
    """The health status name of ``service`` at ``target`` (``"UNREACHABLE: ..."`` on failure)."""
    options = channel_options(target_name)
    try:
        channel = (
            grpc.insecure_channel(target, options=options)
            if tls is None
            else grpc.secure_channel(target, channel_credentials(tls), options=options)
        )
    except FileNotFoundError as exc:
        return f"UNREACHABLE: {exc}"
    with channel:
        try:
            reply = health_pb2_grpc.HealthStub(channel).Check(
                health_pb2.HealthCheckRequest(service=service), timeout=HEALTH_TIMEOUT
            )
        except grpc.RpcError as exc:
            return f"UNREACHABLE: {exc.code().name}: {exc.details()}"
    return health_pb2.HealthCheckResponse.ServingStatus.Name(reply.status)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m privfed.deploy.healthcheck", description=__doc__.split("\n")[0])
    p.add_argument("--target", default=os.environ.get("PRIVFED_HEALTH_TARGET", "127.0.0.1:50051"))
    p.add_argument("--certs", type=Path, default=Path(os.environ.get("PRIVFED_CERTS", "/certs")))
    p.add_argument(
        "--name",
        default=os.environ.get("PRIVFED_HEALTH_NAME", "coordinator"),
        help="certificate to present (NAME.pem, NAME-key.pem in --certs)",
    )
    p.add_argument("--service", default="", help="health service name ('' = the whole server)")
    p.add_argument("--target-name", help="TLS name to expect when --target is an address the certificate lacks")
    p.add_argument("--insecure", action="store_true", help="no TLS (a coordinator started with --insecure)")
    args = p.parse_args(argv)
    status = check(
        args.target,
        tls=None if args.insecure else TlsFiles.in_dir(args.certs, args.name),
        service=args.service,
        target_name=args.target_name,
    )
    print(f"{args.target}: {status}")
    return 0 if status == "SERVING" else 1


if __name__ == "__main__":
    sys.exit(main())

"""Binding a node's owner keys to its certificate: one ECDSA signature per owner (the baseline) vs one
signature over the Merkle tree of the bindings (``signed_keys.sign_key_tree``, issue 27), the pure core.

For N owner keys of one node: ``sign`` makes the node's registration proofs (N signatures / one tree
and its signature, with every inclusion path, as the coordinator rebuilds them), ``verify`` checks
all N keys as a peer node does (N signature checks / N paths and one root check; the root cache is
cleared before each repeat). The certificate chain check, cached per certificate in both, is left out.

Lines: ``name  baseline  candidate  ratio``, medians of ``--repeats`` CPU times measured in the same run,
with the seed-free inputs (fresh keys) and the host's load.

    python bench/key_binding.py [--sizes 1000,10000,50000] [--repeats 5]
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from cryptography import x509
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from privfed.common.secagg.boxes import generate_private_key, public_bytes
from privfed.common.secagg.signed_keys import (
    TreeProof,
    _root_signed,
    key_tree,
    sign_key_tree,
    sign_public_key,
    verify_public_key,
)

NODE = "owner-0"


def _pki() -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate, x509.Certificate]:
    """A CA and one node certificate (ECDSA P-256, as ``privfed certs`` makes them)."""
    now = datetime.now(UTC)

    def cert(
        key: ec.EllipticCurvePrivateKey, cn: str, issuer: x509.Name, signer: ec.EllipticCurvePrivateKey, ca: bool
    ) -> x509.Certificate:
        return (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)]))
            .issuer_name(issuer)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - timedelta(days=1))
            .not_valid_after(now + timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
            .sign(signer, hashes.SHA256())
        )

    ca_key, node_key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "privfed-ca")])
    ca = cert(ca_key, "privfed-ca", ca_name, ca_key, True)
    return node_key, ca, cert(node_key, NODE, ca_name, ca_key, False)


def _cpu(fn: Callable[[], object], repeats: int, before: Callable[[], object] = lambda: None) -> float:
    times = []
    for _ in range(repeats):
        before()
        start = time.process_time()
        fn()
        times.append(time.process_time() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="1000,10000,50000")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    node_key, ca, cert = _pki()
    now = datetime.now(UTC)
    print(f"# bench/key_binding.py  host {platform.node()}  load {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(f"{'name':<28} {'baseline_s':>11} {'candidate_s':>12} {'ratio':>7}")
    for n in (int(s) for s in args.sizes.split(",")):
        bindings = [(f"{NODE}.o{i:06d}", public_bytes(generate_private_key())) for i in range(n)]
        one_by_one = [sign_public_key(node_key, pub, owner) for owner, pub in bindings]
        tree, root_signature = sign_key_tree(node_key, NODE, bindings)
        proofs = [TreeProof(i, n, tree.path(i)) for i in range(n)]

        def sign_each() -> None:
            for owner, pub in bindings:
                sign_public_key(node_key, pub, owner)

        def sign_tree() -> None:
            sign_key_tree(node_key, NODE, bindings)
            rebuilt = key_tree(bindings)  # the coordinator's copy, and every key's path
            for i in range(n):
                rebuilt.path(i)

        def verify_each() -> None:
            for (owner, pub), sig in zip(bindings, one_by_one, strict=True):
                verify_public_key(cert, ca, owner, pub, sig, now=now, cert_identity=NODE)

        def verify_tree() -> None:
            for (owner, pub), proof in zip(bindings, proofs, strict=True):
                verify_public_key(cert, ca, owner, pub, root_signature, now=now, cert_identity=NODE, tree=proof)

        for name, base, cand, before in (
            ("sign", sign_each, sign_tree, lambda: None),
            ("verify", verify_each, verify_tree, _root_signed.cache_clear),
        ):
            b, c = _cpu(base, args.repeats, before), _cpu(cand, args.repeats, before)
            print(f"{f'{name} N={n}':<28} {b:>11.3f} {c:>12.3f} {c / b:>7.3f}")
    print(f"# load at the end {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()

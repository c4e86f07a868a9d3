"""Audit 30, A30-1: a revoked certificate comes back under another fingerprint.

``privfed certs --reissue`` lists the old certificate's SHA-256 fingerprint of its DER bytes, and the service
refuses a TLS peer whose certificate has a listed fingerprint. The federation's certificates are signed with ECDSA,
whose signatures are malleable: (r, s) and (r, n - s) both verify. The signature sits outside the signed part of a
certificate, so whoever holds the leaked key and its (public) old certificate can re-encode the certificate with
the other s: the CA still vouches for it, the TLS handshake accepts it, and its fingerprint is not the listed one.
"""

from __future__ import annotations

import shutil

import grpc
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature, encode_dss_signature

from privfed.common.certificates import fingerprint
from privfed.deploy.certs import REVOKED_FILE, make_certs, reissue
from privfed.proto import privfed_pb2 as pb
from privfed.proto import privfed_pb2_grpc as pb_grpc
from privfed.proto.transport import TlsFiles, channel_credentials, channel_options

NODE = "hospital-b"
P256_ORDER = 0xFFFFFFFF00000000FFFFFFFFFFFFFFFFBCE6FAADA7179E84F3B9CAC2FC632551


def _tlv(data: bytes, at: int) -> tuple[int, int, int]:
    """(start of content, end of content, end of header+content) of the DER element at ``at``."""
    n = data[at + 1]
    if n < 0x80:
        return at + 2, at + 2 + n, at + 2 + n
    k = n & 0x7F
    length = int.from_bytes(data[at + 2 : at + 2 + k], "big")
    return at + 2 + k, at + 2 + k + length, at + 2 + k + length


def _der_length(n: int) -> bytes:
    if n < 0x80:
        return bytes([n])
    b = n.to_bytes((n.bit_length() + 7) // 8, "big")
    return bytes([0x80 | len(b)]) + b


def _other_s(cert: x509.Certificate) -> x509.Certificate:
    """The same certificate with its ECDSA signature's s replaced by n - s: as valid, another fingerprint."""
    der = cert.public_bytes(serialization.Encoding.DER)
    body, _, _ = _tlv(der, 0)
    _, _, tbs_end = _tlv(der, body)
    _, _, alg_end = _tlv(der, tbs_end)
    r, s = decode_dss_signature(cert.signature)
    sig = encode_dss_signature(r, P256_ORDER - s)
    bits = b"\x03" + _der_length(len(sig) + 1) + b"\x00" + sig
    inner = der[body:alg_end] + bits
    return x509.load_der_x509_certificate(b"\x30" + _der_length(len(inner)) + inner)


def test_a_reissued_certificate_with_its_signature_re_encoded_is_still_refused(tmp_path):
    from tls_service import mtls_service

    certs = make_certs(tmp_path / "certs", owners=1, owner_names=[NODE])
    old = tmp_path / "old"
    shutil.copytree(certs / NODE, old / NODE)  # what a thief holds: the leaked key and its certificate
    reissue(certs, [NODE])
    cert_path = old / NODE / f"{NODE}.pem"
    original = x509.load_pem_x509_certificate(cert_path.read_bytes())
    twin = _other_s(original)
    ca = x509.load_pem_x509_certificate((certs / "ca" / "ca.pem").read_bytes())
    twin.verify_directly_issued_by(ca)  # the CA's signature still holds
    assert isinstance(twin.public_key(), ec.EllipticCurvePublicKey)
    assert fingerprint(twin) != fingerprint(original)
    cert_path.write_bytes(twin.public_bytes(serialization.Encoding.PEM))

    revoked = certs / "coordinator" / REVOKED_FILE
    with mtls_service(tmp_path, certs / "coordinator", node_timeout=1.0, revoked_certificates=revoked) as (_, port):
        tls = TlsFiles.in_dir(old / NODE, NODE)
        with grpc.secure_channel(
            f"127.0.0.1:{port}", channel_credentials(tls), options=channel_options(None)
        ) as channel:
            stub = pb_grpc.CoordinatorStub(channel)
            with pytest.raises(grpc.RpcError) as err:
                stub.Predict(pb.PredictRequest(model_id="none-such"), timeout=10)
    assert err.value.code() == grpc.StatusCode.PERMISSION_DENIED, err.value

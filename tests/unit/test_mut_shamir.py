"""Mutation round 2 (common/secagg/shamir.py): what split refuses, and why each refusal matters.

Every check of ``split_joined``'s arguments could be dropped without a secagg test failing: the callers always
pass 32-byte secrets, the points 1..k and ``t = threshold(k)``. Two of those refusals are privacy: a share at the
point 0 *is* the secret (``f(0) = s``), and ``t = 1`` hands it to every holder; a threshold above the holders
loses it. Exact checks, no randomness needed beyond the coefficients.
"""

import secrets

import pytest

from privfed.common.errors import ConfigError, RemoteProtocolError
from privfed.common.secagg import shamir


def test_the_point_zero_would_hand_out_the_secret_and_is_refused():
    secret = secrets.token_bytes(shamir.SECRET_BYTES)
    # why: f(0) is the secret, whatever the coefficients
    assert shamir.combine(shamir.split(secret, [1, 2, 3], 2), 2) == secret
    for xs in ([0, 1, 2], [1, 0, 2], [-1, 1, 2], [1, 2, 2**31]):
        with pytest.raises(ConfigError):
            shamir.split(secret, xs, 2)


@pytest.mark.parametrize("xs", [[1, 1, 2], [3, 2, 3]])
def test_a_repeated_point_is_refused(xs):
    with pytest.raises(ConfigError):
        shamir.split(secrets.token_bytes(shamir.SECRET_BYTES), xs, 2)


@pytest.mark.parametrize("t", [0, -1, 4, True, 2.0])
def test_a_threshold_outside_one_to_the_holders_is_refused(t):
    with pytest.raises(ConfigError):
        shamir.split(secrets.token_bytes(shamir.SECRET_BYTES), [1, 2, 3], t)


@pytest.mark.parametrize("bad", [[], [b"x" * 31], [b"x" * 33], [bytes(32), b"x" * 31], ["x" * 32]])
def test_secrets_of_another_length_or_type_are_refused(bad):
    with pytest.raises(ConfigError):
        shamir.split_joined(bad, [1, 2, 3], 2)


def test_fewer_than_t_shares_and_shares_that_are_not_field_elements_are_refused():
    secret = secrets.token_bytes(shamir.SECRET_BYTES)
    shares = shamir.split(secret, [1, 2, 3, 4], 3)
    with pytest.raises(RemoteProtocolError, match="cannot recover"):
        shamir.combine({1: shares[1], 2: shares[2]}, 3)
    for bad in (shares[1][:-1], shamir.PRIME.to_bytes(shamir.SHARE_BYTES, "big"), "x" * shamir.SHARE_BYTES):
        with pytest.raises(RemoteProtocolError, match="field element"):
            shamir.combine({1: bad, 2: shares[2], 3: shares[3]}, 3)
    # shares of another polynomial mixed in: refused as not a 32-byte secret (probability 2^-128 of passing)
    other = shamir.split(secrets.token_bytes(shamir.SECRET_BYTES), [1, 2, 3, 4], 3)
    with pytest.raises(RemoteProtocolError, match="inconsistent or tampered"):
        shamir.combine({1: shares[1], 2: shares[2], 3: other[3]}, 3)

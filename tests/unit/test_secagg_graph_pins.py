"""The pairwise-mask secure sum's neighbour graph is a public protocol input: the coordinator and every
node recompute it from ``(run id, members)`` and must agree, across versions in a running federation
(:func:`privfed.common.secagg.masking.neighbour_graph`). These SHA-256 digests of whole graphs were
computed by the graph's first implementation (commit 90c2d12, one ``np.unique`` per member); any
change of the output, of a neighbour or of the order of a tuple, fails here. Sizes cover the complete
graph (3, 7), each side of a change of degree (8, 9, 64, 65, 4097) and groups where the last cycles
use all their tries (1000, 10^4).
"""

from __future__ import annotations

import hashlib

import pytest

from privfed.common.secagg.masking import neighbour_graph

PINS = {
    ("run-a", 3): "62569dea521ee5601a20a0e452ee976356f33e3baa897bda5aaf0916fba6cc2c",
    ("run-a", 7): "6b8d30a4663f4fd5b88321184184361a838195261c4ac23745a1ba0a815c3c75",
    ("run-a", 8): "c79e922d4a822ef12ba7d002cd0ecf5f8af7241d1a436d0117d9f58459c9e695",
    ("run-a", 9): "d35fa965f6ba55258e5437c26dd1f29013bf5606b0eccf3cdad7a6f985bab850",
    ("run-a", 20): "8d41060ab11b338fe7af1098b325129bb5047deb5b7eb923c89fbc333ef99aa5",
    ("run-a", 64): "36e230907ab894accd8bc2f534e2be3cc0205bb3bd175be34621aa10e84c8ef1",
    ("run-a", 65): "3428b6a1209b995329ea0864882b3584eb212a3bfeea41e04010162f336e605e",
    ("run-a", 1000): "d0b4f7bd35a317383e133aac18306b34c4390c875827c891db2c43c8175e0a90",
    ("run-a", 4097): "d2df661e078ac7d19e3291547b947e69a5b3d038524fb02ef8f739ae2d22181b",
    ("run-a", 10000): "dd79be7b56c6932c27dcc880b4dcb5e4447ea55297a167e193c60e0936d54907",
    ("job-7f3c/secagg/eval-2", 3): "62569dea521ee5601a20a0e452ee976356f33e3baa897bda5aaf0916fba6cc2c",
    ("job-7f3c/secagg/eval-2", 7): "6b8d30a4663f4fd5b88321184184361a838195261c4ac23745a1ba0a815c3c75",
    ("job-7f3c/secagg/eval-2", 8): "3f6a8f2d784d87fb7d5253be20c313e25abe32cf21639784ce82f9cce76496a2",
    ("job-7f3c/secagg/eval-2", 9): "90dd5cb57e75c158e18715700c4cdea8a01e813f5ff0f39950809753868313af",
    ("job-7f3c/secagg/eval-2", 20): "0a98d08946187151908244a1f3b8738f5edfee144b5be3f2e97d516a52443168",
    ("job-7f3c/secagg/eval-2", 64): "42a0e832d6697a9da972f27eaa9eb10dd0dd24e3326950a5b89c47535535339e",
    ("job-7f3c/secagg/eval-2", 65): "901bb4698899e647c549c30a282f457d853456bc6354907608ec8aaf5b53740b",
    ("job-7f3c/secagg/eval-2", 1000): "1cc33283095275cf89b5b03b610ed14cd1fd31c202d08859ac2d2b77c4400c52",
    ("job-7f3c/secagg/eval-2", 4097): "55f7ca5b8c011af7167945b4e767c45316814c828aaa8e6a68a65c480f435bd0",
    ("job-7f3c/secagg/eval-2", 10000): "a1f8053e71bb55bc9f151df76894aa6688e4f28eddf47855885c61f113f0c5bd",
    ("ü", 3): "62569dea521ee5601a20a0e452ee976356f33e3baa897bda5aaf0916fba6cc2c",
    ("ü", 7): "6b8d30a4663f4fd5b88321184184361a838195261c4ac23745a1ba0a815c3c75",
    ("ü", 8): "b45854f9a3e08b63501b99bd6feed1977539022653093818d6037458faf0345a",
    ("ü", 9): "d38ba7ec093d8cfb750c06a7f5ead9059079598ab4ff1af73cdba57704fef02e",
    ("ü", 20): "4499a0975705f5d40b91bef370b03088d9db2ac7236e7f5a3bebcfb8c6d7f806",
    ("ü", 64): "1063a641c3de743c0b9fb93e36ae2bc41f28962471e0d79e5bb4536a3c9614d5",
    ("ü", 65): "473b142c509ed9e69a9c83601afff69b786ef375a1017f381479f855a68bb030",
    ("ü", 1000): "4d9ce354bc7b1c54871b623c54a300f3f6a859209757ad385190582aaf5204cc",
    ("ü", 4097): "b0359700a2c02732ac76b08ba9aea6e92cb181ec5d7e1ca79794bdc7c3e15f02",
    ("ü", 10000): "2b529430b1708c11552562598c49a3aafe0b7ab0ac7f8780ef04605db75f0755",
}


def _members(n: int) -> tuple[str, ...]:
    """``n`` distinct sorted ids, not in index order before sorting, with a non-ASCII character."""
    return tuple(sorted(f"owner-{i * 7919 % (10 * n)}-é" for i in range(n)))


def _digest(graph: dict[str, tuple[str, ...]]) -> str:
    h = hashlib.sha256()
    for member, near in graph.items():
        assert type(near) is tuple
        h.update(("\0".join((member, *near)) + "\n").encode("utf-8"))
    return h.hexdigest()


@pytest.mark.parametrize(("run_id", "n"), list(PINS))
def test_graph_is_the_pinned_one(run_id, n):
    members = _members(n)
    assert len(set(members)) == n
    assert _digest(neighbour_graph(run_id, members)) == PINS[run_id, n]

"""Audit 32, A32-2: the member-list digest that pairwise-mask key shares are sealed to (audit 31, A31-2) is not
injective.

``members_digest`` hashes each id followed by a NUL byte, on the ground that "ids hold no NUL"; but nothing refuses
one: a step-1 request's members are decoded from a protobuf ``string`` (NUL is valid UTF-8) and checked only for
being sorted and distinct. A coordinator can so hand an owner a list with two or more neighbouring ids joined by
NUL: another list, another graph (another size, so other neighbours and another threshold), sealed to the same
digest as the list its neighbours hold, which is what the seal was added to rule out."""

from __future__ import annotations

from privfed.common.secagg.masking import members_digest, neighbour_graph
from privfed.common.secagg.pairwise import shares_aad

RUN = "run-1"
HONEST = tuple(f"owner-{i:02d}" for i in range(12))


def test_a_list_with_ids_joined_by_nul_is_another_graph_with_the_same_digest():
    joined = (*HONEST[:4], "\0".join(HONEST[4:11]), HONEST[11])  # sorted and distinct: a list an owner accepts
    assert list(joined) == sorted(set(joined))
    assert neighbour_graph(RUN, joined)[HONEST[11]] != neighbour_graph(RUN, HONEST)[HONEST[11]]  # other partners
    assert members_digest(joined) != members_digest(HONEST)
    assert shares_aad(RUN, joined, HONEST[0], HONEST[11]) != shares_aad(RUN, HONEST, HONEST[0], HONEST[11])


def test_the_digest_tells_apart_lists_that_differ_only_in_where_ids_end():
    assert members_digest(("a", "b\0c")) != members_digest(("a", "b", "c"))
    assert members_digest(("a\0", "b")) != members_digest(("a", "\0b"))
    assert members_digest(("a",)) != members_digest(("a", ""))

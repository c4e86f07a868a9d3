"""Pairwise-mask secure aggregation, the coordinator's side, sans-I/O (Bonawitz et al. CCS 2017, Fig. 4).

:class:`SecAggServer` is the server of the protocol in :mod:`privfed.common.secagg.pairwise`: it
decides who takes part in each step and forwards the sealed shares (which it cannot read), then
recovers the sum. It learns ``Σ_{u∈S} x_u`` over the round's survivors ``S`` and nothing else, as
long as fewer than ``t`` of each owner's neighbours collude with it:

* **Self-masks.** For each survivor ``u`` it combines ``t`` shares of ``b_u^r`` from ``u``'s
  surviving neighbours and removes ``PRG(b_u^r)``.
* **Dropped owners.** For each participant ``v`` whose ``y_v`` never came it combines ``t`` shares
  of ``s_v^SK`` from ``v``'s surviving neighbours, checks the key against ``v``'s advert, and
  removes the pairwise masks the survivors added for ``v``. ``v`` is out of the run from then on
  (its key is known); honest owners refuse it as a participant.
* **Shares that do not open** (audit 33, A33-2). An owner whose neighbour's key shares do not open at it refuses
  step 2 with the code ``unopened``, naming that neighbour (:meth:`SecAggServer.on_complaints`): the round is given
  up before anything is unmasked, and the named owner is left out; alone if at least ``t`` of its neighbours name
  it, else with the owners that named it.
* **Too few.** A survivor with fewer than ``t`` surviving neighbours could not have its self-mask
  recovered: it is counted as dropped (its neighbours cancel its pairwise masks instead), repeated
  until stable. When a needed secret still has fewer than ``t`` shares, the round fails with
  :class:`RoundFailed` and nothing is decoded.

The coordinator's policy around it (attempts, key reuse) is :mod:`privfed.common.secagg.transitions`;
its driver (``privfed.server.securesum``) only moves the messages: it asks
:meth:`SecAggServer.on_adverts` etc. whom to send what, and feeds back what came (a missing owner
in a reply mapping is one that did not answer in time).
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping, Sequence

import numpy as np
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey

from privfed.common.errors import ConfigError, LocalProtocolError, RemoteProtocolError, RoundFailed
from privfed.common.secagg import shamir
from privfed.common.secagg.boxes import public_bytes
from privfed.common.secagg.fixedpoint import FixedPoint
from privfed.common.secagg.masking import (
    MIN_MEMBERS,
    neighbour_graph,
    pair_key,
    pair_masks,
    self_masks_sum,
    threshold,
)
from privfed.common.secagg.messages import (
    MAX_ROUNDS,
    InputRequest,
    KeyAdvert,
    KeyShares,
    MaskedInput,
    SealedShare,
    ShareKeysRequest,
    UnmaskReply,
    UnmaskRequest,
)
from privfed.common.validation import check_int


class Phase(enum.Enum):
    KEYS = "keys"  # waiting for the adverts
    SHARES = "shares"  # ShareKeysRequests out, waiting for the key shares
    READY = "ready"  # keys agreed: a round may start
    MASKING = "masking"  # InputRequests out, waiting for masked inputs
    UNMASKING = "unmasking"  # UnmaskRequests out, waiting for the shares


class SecAggServer:
    """The coordinator's machine for all secure sums of one run (module docstring).

    Parameters
    ----------
    run_id : str
        Public; seeds the neighbour graph and salts every key derivation.
    owners : sequence of str
        The owners asked to advertise keys.
    fixed_point : FixedPoint
        The run's encoding; ``n_parties >= len(owners)``.
    rounds : int
        Secure sums (attempts included) the run's key agreement serves: each owner shares one
        self-mask seed per round up front.
    """

    def __init__(self, run_id: str, owners: Sequence[str], fixed_point: FixedPoint, *, rounds: int) -> None:
        if len(set(owners)) != len(owners) or len(owners) < MIN_MEMBERS:
            raise ConfigError(f"a pairwise-mask secure sum needs at least {MIN_MEMBERS} distinct owners")
        if not isinstance(fixed_point, FixedPoint) or fixed_point.n_parties < len(owners):
            raise ConfigError(f"fixed_point must be a FixedPoint with n_parties >= {len(owners)}, got {fixed_point!r}")
        self.run_id, self.owners, self.fixed_point = run_id, tuple(owners), fixed_point
        self.rounds = check_int(rounds, name="rounds", minimum=1, maximum=MAX_ROUNDS)
        self.phase = Phase.KEYS
        self.members: tuple[str, ...] = ()
        self.graph: dict[str, tuple[str, ...]] = {}
        self.keyed: set[str] = set()  # members whose key shares went out
        self.burned: set[str] = set()  # members whose mask key was revealed: out of the run
        self.included: tuple[str, ...] = ()  # the last round's survivors (whose inputs the total sums)
        self._adverts: dict[str, KeyAdvert] = {}
        self._key_inbox: dict[str, list[SealedShare]] = {}  # recipient -> key shares sealed to it
        self._key_shares_sent: set[str] = set()
        self._unmasked: set[str] = set()  # owners whose self-mask was revealed in some round
        self._round = -1
        self._participants: dict[str, tuple[str, ...]] = {}
        self._forwarded: set[str] = set()  # owners whose step-2 request of this round forwarded their key shares
        self._masked: dict[str, MaskedInput] = {}
        self._survivors: dict[str, tuple[str, ...]] = {}
        self._dropped: set[str] = set()

    def _expect(self, *phases: Phase) -> None:
        if self.phase not in phases:
            raise LocalProtocolError(f"secure sum is {self.phase.name}, this step needs {[p.name for p in phases]}")

    @property
    def rounds_left(self) -> int:
        """Secure sums the key agreement can still serve."""
        return self.rounds - self._round - 1

    def _t(self, owner: str) -> int:
        return threshold(len(self.graph[owner]))

    # ------------------------------------------------------------------ once per run
    def on_adverts(self, adverts: Mapping[str, KeyAdvert]) -> dict[str, ShareKeysRequest]:
        """Step 0 answers (owners that did not advertise are left out); returns the step 1 requests."""
        self._expect(Phase.KEYS)
        owners = set(self.owners)  # once, not per advert (that was O(N^2) in the run's size)
        self._adverts = {o: a for o, a in adverts.items() if o in owners and a.owner_id == o}
        self.members = tuple(sorted(self._adverts))
        if len(self.members) < MIN_MEMBERS:
            raise RoundFailed(f"only {len(self.members)} owner(s) advertised a mask key; at least {MIN_MEMBERS} needed")
        self.graph = neighbour_graph(self.run_id, self.members)
        self.phase = Phase.SHARES
        advert = self._adverts.__getitem__
        return {u: ShareKeysRequest(self.members, tuple(map(advert, self.graph[u])), self.rounds) for u in self.members}

    def on_key_shares(self, replies: Mapping[str, KeyShares]) -> None:
        """Step 1 answers: an owner whose shares are not one to each neighbour is left out of the run."""
        self._expect(Phase.SHARES)
        for u, reply in replies.items():
            if u not in self.graph or reply.owner_id != u:
                continue
            if [s.recipient for s in reply.shares] != list(self.graph[u]) or any(s.sender != u for s in reply.shares):
                continue
            self.keyed.add(u)
            for s in reply.shares:
                self._key_inbox.setdefault(s.recipient, []).append(s)
        self.phase = Phase.READY

    # ------------------------------------------------------------------ per round
    def _stable(self, candidates: set[str], pool: set[str]) -> dict[str, tuple[str, ...]]:
        """Each candidate's neighbours in ``pool``, dropping candidates with fewer than ``t`` until stable."""
        live = set(candidates)
        if len(live) == len(pool) == len(self.graph):  # every member (both are subsets): nobody is short
            return {u: self.graph[u] for u in live}
        while True:
            around = {u: tuple(v for v in self.graph[u] if v in pool and v in live) for u in live}
            short = {u for u, near in around.items() if len(near) < self._t(u)}
            if not short:
                return around
            live -= short

    def participants(self, owners: Sequence[str] | None = None) -> dict[str, tuple[str, ...]]:
        """Who of ``owners`` (default all) a round among them would ask, each with its participating
        neighbours: those still in the run with at least ``t`` such neighbours (until stable)."""
        candidates = (self.keyed - self.burned) & set(self.keyed if owners is None else owners)
        return self._stable(candidates, candidates)

    def input_requests(self, owners: Sequence[str] | None = None) -> dict[str, InputRequest]:
        """Step 2 requests of the next round, to :meth:`participants` of ``owners``."""
        self._expect(Phase.READY, Phase.MASKING, Phase.UNMASKING)
        if self._round + 1 >= self.rounds:
            raise RoundFailed(f"the run's key agreement served its {self.rounds} secure sums; start a new run")
        self._participants = self.participants(owners)
        self._round += 1
        requests = {}
        self._forwarded = set()
        for u, near in self._participants.items():
            first = u not in self._key_shares_sent
            self._key_shares_sent.add(u)
            if first:
                self._forwarded.add(u)
            requests[u] = InputRequest(self._round, near, tuple(self._key_inbox.get(u, ())) if first else ())
        self.phase = Phase.MASKING
        return requests

    def on_masked(self, replies: Mapping[str, MaskedInput]) -> dict[str, UnmaskRequest]:
        """Step 2 answers; returns the step 3 requests (to the survivors).

        Raises
        ------
        RoundFailed
            A participant whose self-mask was revealed in an earlier round dropped (revealing its
            mask key now would expose its earlier inputs, so neighbours refuse), or a dropped
            participant has fewer than ``t`` surviving neighbours to recover its key from. No
            unmasking request goes out; the silent participants are out of the run and the
            round must be run again (:meth:`input_requests`).
        """
        self._expect(Phase.MASKING)
        part = self._participants
        ok = {u for u, r in replies.items() if u in part and r.owner_id == u and r.round == self._round}
        sizes = {replies[u].masked.shape[0] for u in ok}
        if len(sizes) > 1:
            self.phase = Phase.READY
            raise RoundFailed(f"masked inputs of different lengths {sorted(sizes)}")
        survivors = self._stable(ok, ok)
        dropped = set(part) - set(survivors)
        owed = {v for v in dropped if any(w in survivors for w in self.graph[v])}  # masks to cancel
        lost = sorted(v for v in owed if v in self._unmasked)
        short = sorted(v for v in owed if sum(w in survivors for w in self.graph[v]) < self._t(v))
        if lost or short:  # fail before anyone reveals a share; run again without the silent ones
            self.burned |= set(part) - ok
            self.phase = Phase.READY
            raise RoundFailed(
                f"round {self._round}: {len(lost)} dropped owner(s) were unmasked in an earlier round "
                f"({lost[:3]}; their mask keys must stay secret) and {len(short)} have fewer than t surviving "
                f"neighbours ({short[:3]}); the round is run again without the silent owners"
            )
        self.burned |= dropped  # out of the run: honest neighbours reveal their keys now
        self._masked = {u: replies[u] for u in survivors}
        self._survivors, self._dropped = survivors, dropped
        self._unmasked |= set(survivors)
        self.phase = Phase.UNMASKING
        return {
            u: UnmaskRequest(self._round, near, tuple(v for v in part[u] if v in dropped))
            for u, near in survivors.items()
        }

    def on_complaints(self, masked: Iterable[str], complaints: Mapping[str, str]) -> tuple[set[str], set[str]]:
        """Step 2's refusals ``unopened``: ``complainer -> accused``, the neighbour whose key shares, forwarded in this
        round's request, did not open at the complainer (audit 33, A33-2). Returns ``(left out, complainers heard and
        not left out)``; with any left out, the round is given up before any share is revealed (as :meth:`on_masked` gives up one it
        cannot finish): the owners that sent no masked input and those left out are out of the run.

        A complaint is heard only from a participant whose request forwarded its shares (its first round) about one
        of its neighbours in the graph. The coordinator cannot tell whether the accused sealed garbage or the
        complainer lies. An accused named by at least ``t`` of its neighbours (``t``, a strict majority of them,
        :func:`~privfed.common.secagg.masking.threshold`, is the protocol's own bound on colluding neighbours) is left
        out alone: an owner sealing garbage to every neighbour costs nobody else a place. One named by fewer is left
        out with every owner that named it, so a false complainer loses its own place each time and takes at most
        the one owner it names with it; fewer than ``t`` hostile neighbours cannot remove an honest owner for free.
        """
        self._expect(Phase.MASKING)
        part = self._participants
        by_accused: dict[str, set[str]] = {}
        for c, a in complaints.items():
            if c in part and c in self._forwarded and a in self.graph.get(c, ()):
                by_accused.setdefault(a, set()).add(c)
        out: set[str] = set()
        for a, by in by_accused.items():
            out |= {a} if len(by) >= self._t(a) else {a, *by}
        heard = set().union(*by_accused.values()) if by_accused else set()
        if heard:
            self.burned |= (set(part) - set(masked)) | out
            self.phase = Phase.READY
        return out, heard - out

    def _combine(self, owner: str, shares_by_holder: Mapping[str, bytes], what: str) -> bytes:
        position = {v: i + 1 for i, v in enumerate(self.graph[owner])}
        shares = {position[w]: s for w, s in shares_by_holder.items() if w in position}
        if len(shares) < self._t(owner):
            raise RoundFailed(
                f"round {self._round}: {len(shares)} share(s) of {owner}'s {what}, fewer than the threshold "
                f"{self._t(owner)}; nothing is decoded"
            )
        try:
            return shamir.combine(shares, self._t(owner))
        except RemoteProtocolError as exc:
            raise RoundFailed(f"round {self._round}: {owner}'s {what}: {exc}") from exc

    def on_unmask(self, replies: Mapping[str, UnmaskReply]) -> np.ndarray:
        """Step 3 answers; returns the decoded sum over :attr:`included`.

        Raises
        ------
        RoundFailed
            A survivor's self-mask seed or a dropped owner's key has fewer than ``t`` shares, or the
            shares do not recover the advertised key; the run stays usable for the next round.
        """
        self._expect(Phase.UNMASKING)
        self.phase = Phase.READY
        answers = {u: r for u, r in replies.items() if u in self._survivors and r.round == self._round}
        m = next(iter(self._masked.values())).masked.shape[0] if self._masked else 0
        if not self._masked:
            raise RoundFailed(f"round {self._round}: no masked input survived")
        held = {w: r.self_shares for w, r in answers.items()}  # holder -> {owner: its share of b_owner}
        seeds = [
            self._combine(u, {w: held[w][u] for w in self.graph[u] if u in held.get(w, ())}, "self-mask")
            for u in self._masked
        ]
        # one sum over the survivors' masked inputs and one over their self-masks (Z_2^64 sums: any order)
        masked = np.stack([reply.masked for reply in self._masked.values()]).astype(np.uint64, copy=False)
        total = FixedPoint.sub(masked.sum(axis=0, dtype=np.uint64), self_masks_sum(seeds, self._round, m))
        for v in sorted(self._dropped):
            owed = [w for w in self.graph[v] if w in self._masked]
            if not owed:
                continue
            raw = self._combine(
                v,
                {w: answers[w].key_shares[v] for w in self.graph[v] if v in getattr(answers.get(w), "key_shares", ())},
                "mask key",
            )
            key = X25519PrivateKey.from_private_bytes(raw)
            if public_bytes(key) != self._adverts[v].public_key:
                raise RoundFailed(f"round {self._round}: the shares of {v}'s mask key do not match its advert")
            for w in owed:
                agreed = key.exchange(X25519PublicKey.from_public_bytes(self._adverts[w].public_key))
                total = FixedPoint.sub(total, pair_masks({v: pair_key(agreed, self.run_id, w, v)}, w, self._round, m))
        return self._in_range(total)

    def _in_range(self, total: np.ndarray) -> np.ndarray:
        """The decoded ``total``, once it is a sum its inputs could make: each honest input is encoded
        from ``|x| <= max_abs``, so a total beyond ``n · max_abs`` (plus rounding) means an owner put a
        value outside the public range into the masked sum (or a wrapped ring value, which decodes to
        garbage). A hostile owner can still shift the total within the range; the ring's leader total
        is checked the same way (``check_boost_evaluate_reply``)."""
        decoded = self.fixed_point.decode(total)
        n = len(self._masked)
        bound = n * self.fixed_point.max_abs + self.fixed_point.error_bound
        if not np.all(np.abs(decoded) <= bound):
            raise RoundFailed(
                f"round {self._round}: the sum of {n} masked inputs lies outside ±{n} × max_abs (±{bound:g}): "
                "an owner's input was outside the public range; nothing is decoded"
            )
        self.included = tuple(sorted(self._masked))
        return decoded

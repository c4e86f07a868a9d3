"""Throughput of the LDP samplers against numpy's own uniform draws (STYLE rule 14).

For each mechanism and each generator kind (``seeded`` PCG64, ``secure`` AES-CTR from
:func:`privfed.common.rng.make_rng`) one line reads::

    name  baseline  candidate  ratio

* baseline: ``rng.random(U)`` with the same generator, ``U`` = the number of uniforms (64-bit
  words) the mechanism consumes for one call (below), as uniforms per second;
* candidate: ``mechanism.privatize(t, rng)`` on the same ``(n, d)`` input, as values
  (``n * d``) per second;
* ratio: ``mechanism_time / uniform_time`` (goal: within 3x).

Each time is the median of ``--repeats`` (>= 5) runs, baseline and candidate interleaved.

Uniforms consumed per call (``n`` rows, ``d`` coordinates):

* ``laplace``: ``n d`` (one 64-bit word per value: a full-precision uniform from 52 mantissa bits
  and 11 exponent bits, 1 bit of sign; one more word for the 1 value in 2048 whose exponent bits
  are all zero; SPEC §12).
* ``duchi`` (Alg. 3): ``n d + n + n d / 64`` (``v`` per coordinate, ``u`` per row, ``d``
  random bits per row for ``z``).
* ``pm`` (Alg. 4): ``2 n k`` (``k`` subset indices and ``k`` PM uniforms per row,
  ``k = max(1, min(d, floor(eps / 2.5)))``). Its time is dominated by writing the dense
  ``(n, d)`` output, mostly zeros: see the ``dense zeros`` line.
* ``pm-1d`` and ``duchi-1d``: the coordinate-wise building blocks, ``n d`` (one per value; PM's is
  a full-precision uniform and a flip bit, as Laplace's).

Run: ``python bench/mechanisms.py`` (n = 10^6, d = 64) or ``--quick`` for a CI smoke run.
"""

from __future__ import annotations

import argparse
import math
import statistics
import time
from collections.abc import Callable, Sequence

import numpy as np

from privfed.common.mechanisms import Duchi1D, Mechanism, PiecewiseMechanism, PiecewiseMultidim, make_mechanism
from privfed.common.rng import make_rng
from privfed.server.report import host_info


def _uniform_count(name: str, mech: Mechanism, n: int, d: int) -> int:
    if name == "laplace" or name.endswith("-1d"):
        return n * d
    if name == "duchi":
        return n * (d + 1) + math.ceil(n * d / 64)
    if name == "pm" and isinstance(mech, PiecewiseMultidim):
        return 2 * n * mech.k
    raise ValueError(name)


def _timed(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def _mechanisms(epsilon: float, d: int) -> dict[str, Mechanism]:
    return {
        "pm": make_mechanism("pm", epsilon=epsilon, d=d),
        "duchi": make_mechanism("duchi", epsilon=epsilon, d=d),
        "laplace": make_mechanism("laplace", epsilon=epsilon, d=d),
        "pm-1d": PiecewiseMechanism(epsilon=epsilon, d=d),
        "duchi-1d": Duchi1D(epsilon=epsilon, d=d),
    }


def run(n: int, d: int, epsilon: float, repeats: int, seed: int, only: Sequence[str] = ()) -> list[dict]:
    t = np.random.Generator(np.random.PCG64(seed)).uniform(-1.0, 1.0, size=(n, d))
    rows = []
    header = f"{'name':<20} {'baseline (uniforms/s)':>22} {'candidate (values/s)':>22} {'ratio':>7}"
    print(header)
    for kind in ("seeded", "secure"):
        rng = make_rng("seeded", seed) if kind == "seeded" else make_rng("secure")
        for name, mech in _mechanisms(epsilon, d).items():
            if only and name not in only:
                continue
            count = _uniform_count(name, mech, n, d)
            mech.privatize(t[: min(n, 1000)], rng)  # warm-up
            base_times, cand_times = [], []
            for _ in range(repeats):
                base_times.append(_timed(lambda: rng.random(count)))
                cand_times.append(_timed(lambda: mech.privatize(t, rng)))
            base, cand = statistics.median(base_times), statistics.median(cand_times)
            row = {
                "name": f"{name}[{kind}]",
                "uniforms": count,
                "baseline_s": base,
                "candidate_s": cand,
                "ratio": cand / base,
            }
            rows.append(row)
            print(
                f"{row['name']:<20} {count / base:>14.3e} ({base * 1e3:6.1f}ms) "
                f"{n * d / cand:>13.3e} ({cand * 1e3:6.1f}ms) {row['ratio']:>6.2f}x",
                flush=True,
            )
        zeros = statistics.median(_timed(lambda: np.zeros((n, d)).fill(0.0)) for _ in range(repeats))
        print(
            f"{'dense zeros':<20} {'':>22} {n * d / zeros:>13.3e} ({zeros * 1e3:6.1f}ms)   (floor for pm: write (n, d))"
        )
    return rows


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small n for a CI smoke run")
    parser.add_argument("--n", type=int, default=None, help="rows (default 10^6, 10^4 with --quick)")
    parser.add_argument("--d", type=int, default=64)
    parser.add_argument("--epsilon", type=float, default=1.0)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--seed", type=int, default=20261122)
    parser.add_argument("--only", default="", help="comma-separated subset of pm,duchi,laplace,pm-1d,duchi-1d")
    args = parser.parse_args(argv)
    n = args.n if args.n is not None else (10_000 if args.quick else 1_000_000)
    repeats = max(5, args.repeats)
    print(
        f"# bench/mechanisms.py seed={args.seed} n={n} d={args.d} epsilon={args.epsilon} repeats={repeats} "
        f"host={host_info()} numpy={np.__version__}"
    )
    print("# ratio = mechanism time / time of rng.random(U) with the same generator, U = uniforms it consumes")
    run(n, args.d, args.epsilon, repeats, args.seed, tuple(filter(None, args.only.split(","))))


if __name__ == "__main__":
    main()

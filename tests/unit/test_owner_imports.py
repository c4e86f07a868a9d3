"""A lean owner node (issue 10): the owner's import path holds numpy, grpcio, protobuf,
cryptography and randomgen (the secure rng), nothing else of the third-party world.

A fresh interpreter runs what ``privfed owner --data FILE ...`` runs before it dials the
coordinator: import the CLI, parse an owner command line, import the owner entry point, load the
CSV, build the logical owners, open the ledger. Then it prints the third-party top-level modules in
``sys.modules``. scikit-learn and pandas (1 s, ~100 MB) and scipy (imported lazily by the tasks
that need it: feddpdr, boosting, the Duchi mechanism, a logistic fit) must not be among them.

Issue 27 moves two boundaries: ``privfed owner`` parses its command line without loading numpy
(only the owner command's parser is built), so that it can pin its BLAS threads before numpy
starts them; and the secure rng loads randomgen's AES counter alone, not its 30 bit generators.
"""

import json
import subprocess
import sys
import textwrap

#: Top-level distributions an owner node may have loaded once it is ready to register.
#: ``grpc_tools``/``grpc_health``: grpcio's own ``import grpc`` imports them when installed (its
#: backwards-compatibility shims), ``google``: protobuf, ``typing_extensions``: cryptography's.
ALLOWED = {"numpy", "grpc", "grpc_tools", "grpc_health", "google", "cryptography", "randomgen", "typing_extensions"}

PROBE = textwrap.dedent("""
    import json, sys, tempfile
    from pathlib import Path

    tmp = Path(tempfile.mkdtemp())
    (tmp / "rows.csv").write_text("0.1,0.2,0\\n0.3,-0.4,1\\n-0.5,0.6,1\\n")
    from privfed.deploy.cli import build_parser

    args = build_parser("owner").parse_args([
        "owner", "--coordinator", "127.0.0.1:1", "--name", "owner-0", "--insecure",
        "--data", str(tmp / "rows.csv"), "--bounds=-1:1", "--shards", "2",
        "--ledger", str(tmp / "ledger.sqlite"), "--epsilon-budget", "1"])
    from privfed.common.ledger import Ledger
    from privfed.owner.data import build_owners, load_owner_file, parse_shards
    import privfed.owner.main  # noqa: F401  (the entry point run_owner lives here)

    ds = load_owner_file(args.data, args.bounds, args.classes)
    owners = build_owners(ds, node_id=args.name, n_owners=2, shards=parse_shards(args.shards, 2), seed=0,
                          rng_kind=args.rng, rng_seed=0)
    Ledger(args.ledger, epsilon_budget=args.epsilon_budget).close()
    assert len(owners) == 2
    std = set(sys.stdlib_module_names)
    tops = {name.split(".")[0] for name in sys.modules}
    print(json.dumps(sorted(t for t in tops if t not in std and t != "privfed" and not t.startswith("_")
                            and t != "cython_runtime")))
""")


def _third_party_modules(code: str) -> set[str]:
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return set(json.loads(out.stdout.strip().splitlines()[-1]))


def test_data_owner_loads_only_the_lean_set():
    loaded = _third_party_modules(PROBE)
    assert loaded <= ALLOWED, f"unexpected on the owner path: {sorted(loaded - ALLOWED)}"
    assert {"numpy", "grpc", "cryptography"} <= loaded


def test_data_owner_never_loads_plotting_or_progress_bars():
    loaded = _third_party_modules(PROBE)
    assert not loaded & {"matplotlib", "tqdm"}


def test_query_methods_spelled_out_match_the_cleaners():
    """owner/query_cleaning.py names the null-space methods itself (so the CLI parser needs no scipy)."""
    from privfed.common.nullspace import METHODS
    from privfed.owner.query_cleaning import MAP_METHODS, QUERY_METHODS

    assert QUERY_METHODS == ("projection", *METHODS)
    assert MAP_METHODS == METHODS


COORDINATOR_PROBE = textwrap.dedent("""
    import json, sys
    from privfed.deploy.cli import build_parser

    build_parser().parse_args(["coordinator", "--task", "bdt", "--insecure", "--owners", "2", "--epsilon", "1"])
    import privfed.server.app, privfed.server.job, privfed.server.main  # noqa: F401, E401
    from privfed.server.strategies import make_strategy  # noqa: F401
    std = set(sys.stdlib_module_names)
    tops = {name.split(".")[0] for name in sys.modules}
    print(json.dumps(sorted(t for t in tops if t not in std and t != "privfed" and not t.startswith("_")
                            and t != "cython_runtime")))
""")


def test_an_idle_coordinator_loads_the_lean_set_too():
    """The coordinator imports scipy (FedDPDR, stump tables), tqdm (a progress bar on a terminal)
    only when a job needs them: waiting for owners costs what an owner node costs."""
    loaded = _third_party_modules(COORDINATOR_PROBE)
    assert loaded <= ALLOWED, f"unexpected on the coordinator path: {sorted(loaded - ALLOWED)}"


PIN_PROBE = textwrap.dedent("""
    import json, sys
    import privfed.deploy.threads
    from privfed.deploy.cli import main

    def pin(threads):  # what privfed owner does first, stopped there
        print(json.dumps({"threads": threads, "numpy_loaded": "numpy" in sys.modules}))
        raise SystemExit(0)

    privfed.deploy.threads.pin_threads = pin
    main(["owner", "--coordinator", "127.0.0.1:1", "--name", "owner-0", "--insecure", "--data", "rows.csv",
          "--bounds=-1:1", "--classes", "3", "--n-owners", "4", "--shards", "0:2", "--ledger", "l.sqlite",
          "--epsilon-budget", "1", "--delta-budget", "0", "--connect-timeout", "5", "--threads", "1"])
""")


def test_privfed_owner_pins_its_threads_before_numpy_loads():
    """BLAS reads its thread count when numpy loads: the owner command line is parsed without numpy."""
    out = subprocess.run([sys.executable, "-c", PIN_PROBE], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout.strip().splitlines()[-1]) == {"threads": 1, "numpy_loaded": False}


SECURE_PROBE = textwrap.dedent("""
    import json, sys
    import numpy as np
    from privfed.common.rng import make_rng

    bit_generator = type(make_rng("secure").bit_generator)
    lean = sorted(m for m in sys.modules if m.split(".")[0] == "randomgen")
    import randomgen  # the whole package still imports, and its class is the one the owner used

    same = randomgen.AESCounter is bit_generator and bool(randomgen.ChaCha(seed=1).random_raw())
    a, b = (np.random.Generator(cls(key=2**100 + 7)).random(4).tolist() for cls in (bit_generator, randomgen.AESCounter))
    print(json.dumps({"lean": lean, "same": same and a == b}))
""")


def test_secure_rng_loads_only_randomgens_aes_counter():
    out = subprocess.run([sys.executable, "-c", SECURE_PROBE], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got == {"lean": ["randomgen.aes", "randomgen.common", "randomgen.seed_sequence"], "same": True}

"""Where a round's CPU and wake-ups go, by thread (issue 27): the counters ``bench/federation.py`` reads.

With N processes on C cores a round of one-owner nodes costs at least their summed CPU / C, and each
time a thread sleeps and is woken (a context switch) the box's scheduler has to find it a core among
the N + 1 processes. :func:`snapshot` reads, per thread of a live process, the scheduler's CPU counter
(``/proc/PID/task/TID/schedstat``, nanoseconds) and its context switches (``voluntary_ctxt_switches``
+ ``nonvoluntary_ctxt_switches`` of ``/proc/PID/task/TID/status``), summed over three classes:

* ``main``: the process's main thread (TID = PID): a node's serving loop, the owner core, the fit;
* ``python``: the interpreter's other threads (named like the process): in a node, the threads gRPC's
  synchronous stream hands each message through (the channel's spin thread, the request consumer)
  and the session's watchdog; in the coordinator, the gRPC worker threads that run its handlers;
* ``grpc core``: threads gRPC's C core names itself (``event_engine``, ``grpc_global_tim``, ...):
  the socket I/O.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

CLASSES = ("main", "python", "grpc core")


@dataclass(frozen=True)
class Counts:
    """CPU seconds and context switches (voluntary, involuntary) of some threads."""

    cpu: float = 0.0
    voluntary: float = 0.0
    involuntary: float = 0.0

    def __add__(self, other: Counts) -> Counts:
        return Counts(self.cpu + other.cpu, self.voluntary + other.voluntary, self.involuntary + other.involuntary)

    def __sub__(self, other: Counts) -> Counts:
        return Counts(self.cpu - other.cpu, self.voluntary - other.voluntary, self.involuntary - other.involuntary)

    def scaled(self, factor: float) -> Counts:
        return Counts(self.cpu * factor, self.voluntary * factor, self.involuntary * factor)

    @property
    def switches(self) -> float:
        return self.voluntary + self.involuntary


def _thread(task: Path) -> tuple[str, Counts]:
    """(comm, counts) of one thread; raises OSError if it ended meanwhile."""
    cpu = int((task / "schedstat").read_text().split()[0]) / 1e9
    switches = {}
    for line in (task / "status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("voluntary_ctxt_switches", "nonvoluntary_ctxt_switches"):
            switches[key] = float(value)
    counts = Counts(cpu, switches.get("voluntary_ctxt_switches", 0.0), switches.get("nonvoluntary_ctxt_switches", 0.0))
    return (task / "comm").read_text().strip(), counts


def snapshot(pid: int) -> dict[str, Counts]:
    """The counts so far of process ``pid``'s live threads, by class (``CLASSES``). A thread that ended
    is not counted, nor are its counts before: read snapshots while the threads of interest live."""
    root = Path(f"/proc/{pid}/task")
    main_comm, _ = _thread(root / str(pid))
    out = dict.fromkeys(CLASSES, Counts())
    for task in root.iterdir():
        try:
            comm, counts = _thread(task)
        except (OSError, IndexError, ValueError):  # a thread that just ended
            continue
        kind = "main" if task.name == str(pid) else ("python" if comm == main_comm else "grpc core")
        out[kind] += counts
    return out


def per_round(before: dict[str, Counts], after: dict[str, Counts], rounds: int) -> dict[str, Counts]:
    """The counts of each class per round between two snapshots of one process."""
    return {k: (after[k] - before[k]).scaled(1.0 / rounds) for k in CLASSES}


def mean(processes: list[dict[str, Counts]]) -> dict[str, Counts]:
    """Each class's counts averaged over ``processes``."""
    total = dict.fromkeys(CLASSES, Counts())
    for p in processes:
        for k in CLASSES:
            total[k] += p[k]
    return {k: v.scaled(1.0 / max(len(processes), 1)) for k, v in total.items()}


def total(counts: dict[str, Counts]) -> Counts:
    """Every class together."""
    out = Counts()
    for v in counts.values():
        out += v
    return out


@dataclass(frozen=True)
class RoundCost:
    """Per round: the coordinator's counts and one node process's (the mean over ``nodes``), by class."""

    coordinator: dict[str, Counts]
    node: dict[str, Counts]
    nodes: int

    @property
    def cpu(self) -> float:
        """CPU seconds of the coordinator and every node together."""
        return total(self.coordinator).cpu + self.nodes * total(self.node).cpu

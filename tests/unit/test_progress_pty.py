"""Progress bars show on a terminal, a pseudo-terminal included (issue 24): a pty that has no size
set (``script``, CI runners, ``docker run -t``) reports 0 x 0, from which tqdm draws nothing;
:func:`privfed.server.progress.bar_shape` gives the bar 80 x 24 there. A batch shorter than
:data:`privfed.server.progress.DELAY_S` draws no bar at all (a ring's one-owner hops flashed one each)."""

import os
import pty
import subprocess
import sys

import pytest

BAR = """
import sys, time
from tqdm import tqdm
from privfed.server.progress import bar_shape
shape = bar_shape() if sys.argv[1] == "shaped" else {}
with tqdm(total=4, desc="owners registered", leave=False, unit="owner", **shape) as bar:
    bar.update(2)
    time.sleep(0.2)
    bar.update(2)
"""


BATCH = """
import sys, time
from privfed.server.progress import progress_bar
with progress_bar(True, 1, "round r-7") as bar:
    time.sleep(float(sys.argv[1]))
    bar.update(1)
"""


def _in_a_pty(mode: str, program: str = BAR) -> str:
    """What a child writes to a fresh pty (no window size set: 0 x 0) that is its stderr."""
    master, slave = pty.openpty()
    child = subprocess.Popen([sys.executable, "-c", program, mode], stdin=slave, stdout=slave, stderr=slave)
    os.close(slave)
    out = b""
    while True:
        try:
            chunk = os.read(master, 4096)
        except OSError:  # EIO: the child closed its end
            break
        if not chunk:
            break
        out += chunk
    os.close(master)
    assert child.wait(timeout=60) == 0, out
    return out.decode(errors="replace")


@pytest.mark.skipif(not hasattr(pty, "openpty"), reason="needs a pseudo-terminal")
def test_the_bar_shows_on_a_pty_without_a_size():
    assert "owners registered" not in _in_a_pty("plain")  # tqdm alone: nothing (the bug)
    shown = _in_a_pty("shaped")
    assert "owners registered: 100%" in shown and "4/4" in shown, shown


@pytest.mark.skipif(not hasattr(pty, "openpty"), reason="needs a pseudo-terminal")
def test_a_batch_shorter_than_the_delay_draws_no_bar_and_a_longer_one_does():
    assert "round r-7" not in _in_a_pty("0", BATCH)
    assert "round r-7" in _in_a_pty("1.2", BATCH)

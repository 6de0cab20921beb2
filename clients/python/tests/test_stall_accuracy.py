"""run.timed around a real torch DataLoader: the measured stall share is the injected one.

torch is too big for the client's own test dependencies, so the loop runs in the
``.venv-torch`` virtualenv that ``make .venv/.dev`` builds (``CADENCE_TORCH_VENV``
elsewhere), with this tree's client on its path.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

CLIENT_ROOT = Path(__file__).resolve().parents[1]
PROJECT_ROOT = CLIENT_ROOT.parents[1]
TORCH_VENV = Path(os.environ.get("CADENCE_TORCH_VENV", PROJECT_ROOT / ".venv-torch"))

# Each item takes LOAD s to load and each step COMPUTE s to train: the loop waits for
# data LOAD / (LOAD + COMPUTE) = 0.02 / (0.02 + 0.03) = 40% of its time. On a busy
# machine a sleep overshoots, so the injected share is what the loader really slept
# (timed inside __getitem__) over the loop's wall clock.
LOOP = """
import json, sys, time
import httpx, torch
from torch.utils.data import DataLoader, Dataset
from cadence_client import CadenceClient

LOAD, COMPUTE, STEPS = 0.02, 0.03, 60
slept = []

class Slow(Dataset):
    def __len__(self):
        return STEPS
    def __getitem__(self, i):
        start = time.perf_counter()
        time.sleep(LOAD)  # a slow disk or decoder
        slept.append(time.perf_counter() - start)
        return torch.full((4,), float(i))

model = torch.nn.Linear(4, 1)
posted = []
def server(request):
    body = json.loads(request.content)
    if body.get("outcome") != "running":  # track_run's start report, posted on entry
        posted.append(body)
    return httpx.Response(201, json={"id": 1})

with CadenceClient("http://cadence.test", "cad_x", transport=httpx.MockTransport(server)) as c:
    with c.track_run(pipeline="p", run_id="r", workers=1, gpu_utilization=0.5) as run:
        start = time.perf_counter()
        for batch in run.timed(DataLoader(Slow(), batch_size=1, num_workers=0)):
            model(batch).sum().backward()
            time.sleep(COMPUTE)  # the rest of the step
        wall = time.perf_counter() - start
print(json.dumps({"stall_seconds": posted[0]["data_stall_hours"] * 3600, "wall": wall,
                  "injected_seconds": sum(slept), "items": len(slept)}))
"""


def test_the_measured_stall_share_is_within_five_points_of_the_injected_one() -> None:
    python = TORCH_VENV / "bin" / "python"
    assert python.exists(), (
        f"no torch venv at {TORCH_VENV}: run `make .venv/.dev` (it builds it) or set "
        "CADENCE_TORCH_VENV"
    )
    done = subprocess.run(
        [str(python), "-c", LOOP],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(CLIENT_ROOT)},
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    measured = result["stall_seconds"] / result["wall"]
    injected = result["injected_seconds"] / result["wall"]
    assert result["items"] == 60  # every item was loaded through the wrapper
    assert abs(measured - injected) <= 0.05, result
    assert 0.3 <= injected <= 0.5, result  # about the 40% set up (sleeps overshoot)

"""The Lightning and Transformers callbacks on the CPU, each with a tiny model built from
code or a config (nothing downloaded), a loader that sleeps LOAD s an item and a step
that sleeps COMPUTE s: the stall they measure is what the loader slept, plus at most 10
points of the fit's wall clock (the gap between two steps also holds the framework's own
per-step work, a few ms on a busy machine), and they time the checkpoints it wrote.

Like test_stall_accuracy.py, these run in the ``.venv-torch`` virtualenv.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from test_stall_accuracy import CLIENT_ROOT, TORCH_VENV

COMMON = """
import json, sys, tempfile, time
import httpx, torch
from torch.utils.data import DataLoader, Dataset
from cadence_client import CadenceClient

LOAD, COMPUTE, STEPS = 0.02, 0.03, 20
slept = []

class Slow(Dataset):
    def __len__(self):
        return STEPS
    def __getitem__(self, i):
        start = time.perf_counter()
        time.sleep(LOAD)
        slept.append(time.perf_counter() - start)
        return ITEM(i)

posted = []
def server(request):
    body = json.loads(request.content)
    if body.get("outcome") != "running":  # track_run's start report, posted on entry
        posted.append(body)
    return httpx.Response(201, json={"id": 1})

def tracked(fit):
    transport = httpx.MockTransport(server)
    with CadenceClient("http://cadence.test", "cad_x", transport=transport) as cadence:
        with cadence.track_run(pipeline="p", run_id="r", workers=1, gpu_utilization=0.5) as run:
            start = time.perf_counter()
            fit(run)
            wall = time.perf_counter() - start
    print(json.dumps({"stall": posted[0].get("data_stall_hours", 0) * 3600,
                      "checkpoint": posted[0].get("checkpoint_hours", 0) * 3600,
                      "slept": sum(slept), "wall": wall}))
"""

LIGHTNING = """
import lightning.pytorch as pl
from lightning.pytorch.callbacks import ModelCheckpoint
from cadence_client.integrations.lightning import CadenceCallback

ITEM = lambda i: torch.full((4,), float(i))

class Tiny(pl.LightningModule):
    def __init__(self):
        super().__init__()
        self.layer = torch.nn.Linear(4, 1)
    def training_step(self, batch, index):
        time.sleep(COMPUTE)
        return self.layer(batch).sum()
    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.01)

def fit(run):
    with tempfile.TemporaryDirectory() as where:
        trainer = pl.Trainer(
            max_epochs=1, accelerator="cpu", devices=1, logger=False,
            enable_progress_bar=False, enable_model_summary=False, default_root_dir=where,
            callbacks=[CadenceCallback(run),
                       ModelCheckpoint(dirpath=where, every_n_train_steps=10, save_top_k=-1)],
        )
        trainer.fit(Tiny(), DataLoader(Slow(), batch_size=1))

tracked(fit)
"""

TRANSFORMERS = """
from transformers import BertConfig, BertForSequenceClassification, Trainer, TrainingArguments
from cadence_client.integrations.huggingface import CadenceTrainerCallback

ITEM = lambda i: {"input_ids": torch.tensor([1, 2, 3]), "labels": torch.tensor(i % 2)}

class SlowTrainer(Trainer):
    def training_step(self, *args, **kwargs):
        time.sleep(COMPUTE)
        return super().training_step(*args, **kwargs)

def fit(run):
    config = BertConfig(vocab_size=16, hidden_size=8, num_hidden_layers=1,
                        num_attention_heads=1, intermediate_size=8, num_labels=2)
    with tempfile.TemporaryDirectory() as where:
        args = TrainingArguments(
            output_dir=where, max_steps=STEPS, per_device_train_batch_size=1,
            save_steps=10, logging_steps=1000, report_to=[], use_cpu=True,
            dataloader_num_workers=0, disable_tqdm=True,
        )
        trainer = SlowTrainer(model=BertForSequenceClassification(config), args=args,
                              train_dataset=Slow(), callbacks=[CadenceTrainerCallback(run)])
        trainer.train()

tracked(fit)
"""


@pytest.mark.parametrize("loop", [LIGHTNING, TRANSFORMERS], ids=["lightning", "transformers"])
def test_a_frameworks_callback_measures_the_stall_and_the_checkpoints(
    loop: str, tmp_path: Path
) -> None:
    python = TORCH_VENV / "bin" / "python"
    assert python.exists(), f"no torch venv at {TORCH_VENV}: run `make .venv/.dev`"
    env = {**os.environ, "PYTHONPATH": str(CLIENT_ROOT), "HF_HUB_OFFLINE": "1",
           "TRANSFORMERS_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf")}  # fmt: skip
    done = subprocess.run(
        [str(python), "-c", COMMON + loop],
        capture_output=True, text=True, env=env, timeout=600, check=False, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-4000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["slept"] >= 20 * 0.02, result  # every item went through the loader
    assert result["stall"] >= 0.9 * result["slept"], result  # the waits were all seen
    assert result["stall"] - result["slept"] <= 0.10 * result["wall"], result
    assert result["checkpoint"] > 0, result  # two checkpoints were written

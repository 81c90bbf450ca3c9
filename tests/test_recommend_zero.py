"""ZeRO and FSDP in the recommender: a device holds its share of the optimizer state (stage 1), of the
gradients (2) and of the weights (3) among all the job's devices, so a model too big for one GPU fits on
several; its activations are its own micro-batch's, never shared."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from advisor.comm.sync import Spread
from advisor.introspect import Layer, LayerKind, LayerTable, Scaling, TensorShape
from advisor.introspect.table import Probe, TrainingSettings
from advisor.jobscript.advisor_lines import JobDescription
from advisor.jobscript.request import build_request
from advisor.policy.load import parse_policy
from advisor.predict.peak_memory import MemoryFit
from advisor.predict.scaling import DeviceSpec
from advisor.predict.service import Predictors
from advisor.recommend.ask import Ask, Caller
from advisor.recommend.edges import StoredModels
from advisor.recommend.estimator import Context
from advisor.recommend.service import recommend
from advisor.store import Store
from advisor.wait.accuracy import WaitEstimate

from .recommend_support import MEMORY_MB, trained_store
from .test_recommend_arrays import A100, node
from .test_recommend_edges import APART, LORA, _one_linear


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Store:
    return trained_store(tmp_path_factory.mktemp("zero"))


def _linear(index: int, inputs: int, outputs: int) -> Layer:
    """An ``inputs`` -> ``outputs`` linear without bias: it reads its input and its fp32 weights, writes
    its output."""
    flops = 2 * inputs * outputs
    return Layer(
        index=index, name=f"fc{index}", op="Linear", kind=LayerKind.LINEAR,
        inputs=(TensorShape(dims=(1, inputs), batch_dim=0),),
        outputs=(TensorShape(dims=(1, outputs), batch_dim=0),),
        parameters=inputs * outputs, forward_flops=Scaling(per_sample=flops),
        backward_flops=Scaling(per_sample=2 * flops),
        bytes_read=Scaling(per_sample=4 * inputs, fixed=4 * inputs * outputs),
        bytes_written=Scaling(per_sample=4 * outputs),
    )  # fmt: skip


def _linears(depth: int, inputs: int, outputs: int) -> LayerTable:
    """``depth`` linears side by side (a toy: the same input for each); each keeps its fp32 input for the
    backward."""
    layers = tuple(_linear(i, inputs, outputs) for i in range(depth))
    saved = Scaling(per_sample=4 * inputs * depth)
    return LayerTable.build("lab.nets:stack", {}, (3, 8, 8), Probe(layers, depth * inputs * outputs, saved))


H100 = DeviceSpec(name="H100", flops=67e12, bandwidth=3.35e12, memory_bytes=80 * 10**9)
"""Never benchmarked: its steps are scaled from a benchmarked machine's."""


@pytest.mark.parametrize(
    ("stage", "peak"),
    [
        # weights + gradients + momentum, 800 B each, over 4 devices from each stage on; 320 B of saved
        # input (8 x 10 floats) and a transient 960 B (8 x 10 floats in, 8 x 20 out; weights are state) each.
        (None, 800 + 800 + 800 + 320 + 960),
        (0, 800 + 800 + 800 + 320 + 960),
        (1, 800 + 800 + 200 + 320 + 960),
        (2, 800 + 200 + 200 + 320 + 960),
        (3, 200 + 200 + 200 + 320 + 960),
    ],
)
def test_each_zero_stage_shards_its_state_over_all_the_jobs_devices_and_not_the_activations(
    store: Store, stage: int | None, peak: int
) -> None:
    """One 10 -> 20 linear (200 fp32 parameters, SGD with momentum) at a micro-batch of 8 on 2 GPUs on
    each of 2 nodes; the a100's memory fit at the plain sum of its terms, so the peak is the counted one,
    on the a100 and scaled from it to an h100 that was never benchmarked."""
    trained = Predictors.load(store)
    machine = next(f.machine() for f in trained.fingerprints if f.partition == "a100")
    model, version = trained.models[machine]
    summed = model.model_copy(update={"memory": MemoryFit()})
    predictors = Predictors(trained.fingerprints, {machine: (summed, version)}, {})
    table = _linears(1, 10, 20).trained(None if stage is None else TrainingSettings(zero_stage=stage))
    models = StoredModels(store, predictors, [H100], table, [], {})
    for partition in ("a100", "h100"):
        assert models.step(partition, 2, 2, 8, False, False).peak_memory_bytes == peak, partition
        alone = models.step(partition, 1, 1, 8, False, False).peak_memory_bytes
        assert alone == 800 + 800 + 800 + 320 + 960, "one device shares nothing"
    assert models.step("h100", 2, 2, 8, False, False).scaled_from == machine


T4 = A100.model_copy(
    update={"name": "t4", "gpu_type": "t4", "node_names": ["t4-1"], "nodes": [node("t4-1", 4)]}
)
"""The trained store's t4: 155 MB a GPU."""


@pytest.mark.parametrize("stage", [None, 3])
def test_a_zero_3_job_too_big_for_one_gpu_fits_on_four(store: Store, stage: int | None) -> None:
    """Eight 1,024 -> 2,048 linears: 16.8 M parameters, 201 MB of fp32 weights, gradients and momentum,
    more than a t4's 155 MB; ZeRO-3 on the job's 4 GPUs leaves 50 MB of them on each."""
    table = _linears(8, 1024, 2048).trained(None if stage is None else TrainingSettings(zero_stage=stage))
    request = build_request("#!/bin/sh\n#SBATCH -p t4 --gres=gpu:4\ntrue\n", [], {}, "job.sh")
    described = {"model": "lab.nets:stack", "global_batch": 32, "steps": 100, "zero_stage": stage}
    description = JobDescription.model_validate(described)
    ask = Ask(request, description, Caller("alice"), datetime(2026, 12, 4, tzinfo=UTC))
    waits = WaitEstimate(slurm_wait_s=0.0, advisor_wait_s=None, preferred="slurm")
    context = Context(parse_policy("", "p.toml"), [T4], lambda queries: [waits] * len(queries))
    predictors = Predictors.load(store)
    result = recommend(context, ask, StoredModels(store, predictors, [], table, [T4], {}))
    found = result.baseline
    assert found is not None and found.candidate.gpus == 4 and found.candidate.micro_batch == 8
    assert found.fits is (stage == 3)
    assert (found.peak_memory_bytes < MEMORY_MB["t4"] * 2**20) is (stage == 3), found.peak_memory_bytes
    others = [e for e in result.candidates if e.candidate != found.candidate]
    # Its micro-batches are sized on its own 4 GPUs: mixed precision, on 4 GPUs, is a candidate too.
    assert any(e.fits and e.candidate.amp for e in others) is (stage == 3), result.candidates


@pytest.mark.parametrize(
    ("training", "traffic"),
    [
        (TrainingSettings(zero_stage=2), 800),  # reduce-scatter and gather: one all-reduce of 200 floats
        (TrainingSettings(zero_stage=3), 800 + 800 // 2),  # every weight gathered twice, gradients scattered
        (LORA.model_copy(update={"zero_stage": 3}), (200 + 60) * 4 + 60 * 4 // 2),  # base and adapters
    ],
    ids=["stage-2", "stage-3", "stage-3-lora"],
)
def test_zero_3_moves_the_weights_besides_the_gradients(
    store: Store, training: TrainingSettings, traffic: int
) -> None:
    """Four devices, one ring: 2 x 3/4 of the all-reduced bytes at a megabyte a second, nothing hidden;
    a 10 -> 20 linear's 200 weights, under LoRA of rank 2 with 60 adapter weights besides."""
    table = _one_linear().trained(training)
    models = StoredModels(store, Predictors([], {}, {}), [], table, [], {"a100": APART})
    added = models.sync("a100", Spread(devices=4, nodes=1), micro_step_s=0.5).added_s
    assert added == pytest.approx(1.5 * traffic / 1e6)

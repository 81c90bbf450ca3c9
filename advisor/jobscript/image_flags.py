"""The flags each image program defines (its argparse parser), ``_`` spelt ``-`` as
`arguments.program_options` reads them: a command with a flag of its own that sizes the job
(``--max_epochs``, ``--devices``) is not that program's, whatever flags it shares with it, so none of its
defaults is assumed.

Read from the projects' sources: torchvision's ``references/classification/train.py`` (its
``get_args_parser`` at 017e9b9, with the flags later versions add: ``--ra-sampler``, ``--ra-reps``,
``--bias-weight-decay``, ``--transformer-embedding-decay``, ``--ra-magnitude``, ``--augmix-severity``,
``--backend``, ``--use-v2``, and ``--lr-min``); timm's ``train.py`` (aa4b585); PyTorch's
``imagenet/main.py`` (pytorch/examples 77f55b9); DeiT's ``main.py`` (7e160fe), ConvNeXt's (048efce) and
MAE's ``main_pretrain.py`` and ``main_finetune.py`` (efb2a80), one set.
"""

from __future__ import annotations


def _names(text: str) -> frozenset[str]:
    return frozenset(text.split())


TORCHVISION = _names(
    """
    amp augmix-severity auto-augment b backend batch-size bias-weight-decay cache-dataset
    clip-grad-norm cutmix-alpha data-path device dist-url epochs interpolation j label-smoothing lr
    lr-gamma lr-min lr-scheduler lr-step-size lr-warmup-decay lr-warmup-epochs lr-warmup-method
    mixup-alpha model model-ema model-ema-decay model-ema-steps momentum norm-weight-decay opt
    output-dir pretrained print-freq ra-magnitude ra-reps ra-sampler random-erase resume start-epoch
    sync-bn test-only train-crop-size transformer-embedding-decay use-deterministic-algorithms
    use-v2 val-crop-size val-resize-size wd weight-decay weights workers world-size
    """
)

TIMM = _names(
    """
    aa amp amp-dtype aug-repeats aug-splits b batch-size bce-loss bce-pos-weight bce-sum
    bce-target-thresh bn-eps bn-momentum c channels-last checkpoint-hist class-map clip-grad
    clip-mode color-jitter color-jitter-prob config cooldown-epochs crop-pct cutmix cutmix-minmax
    data-dir dataset dataset-download dataset-trust-remote-code decay-epochs decay-milestones
    decay-rate device device-modules dist-bn distill-loss-weight dr drop drop-block drop-connect
    drop-path epoch-repeats epochs eval-metric experiment fast-norm fuser gaussian-blur-prob gp
    grad-accum-steps grad-checkpointing grayscale-prob head-init-bias head-init-scale hflip img-size
    in-chans initial-checkpoint input-img-mode input-key input-size interpolation j jsd-loss
    kd-distill-type kd-loss-type kd-model-name kd-student-feature-dim kd-teacher-feature-dim
    kd-temperature kd-token-distill-type layer-decay layer-decay-min-scale layer-decay-no-opt-scale
    local-rank log-interval log-wandb lr lr-base lr-base-scale lr-base-size lr-cycle-decay
    lr-cycle-limit lr-cycle-mul lr-k-decay lr-noise lr-noise-pct lr-noise-std mean min-lr mixup
    mixup-mode mixup-off-epoch mixup-prob mixup-switch-prob model model-dtype model-ema
    model-ema-decay model-ema-force-cpu model-ema-warmup model-kwargs momentum naflex-loader
    naflex-loss-scale naflex-max-seq-len naflex-patch-size-probs naflex-patch-sizes
    naflex-patchify-channels-first naflex-train-seq-lens no-aug no-ddp-bb no-prefetcher
    no-resume-opt num-classes opt opt-betas opt-eps opt-kwargs output patience-epochs pin-mem
    pretrained pretrained-path ratio recount recovery-interval remode reprob resplit resume
    save-images scale sched sched-on-updates seed smoothing split-bn start-epoch std sync-bn
    synchronize-step target-key task-loss-weight torchcompile torchcompile-mode torchscript
    train-batch-sizes train-batches-per-epoch train-crop-mode train-img-sizes train-interpolation
    train-num-samples train-size-probs train-size-random-mix train-size-schedule
    train-size-schedule-spread train-split train-steps-per-epoch tta use-multi-epochs-loader
    val-interval val-num-samples val-split validation-batch-size variable-batch-loss-scale vb vflip
    wandb-project wandb-resume-id wandb-tags warmup-epochs warmup-lr warmup-prefix weight-decay
    worker-seeding workers
    """
)

IMAGENET = _names(
    """
    a arch b batch-size dist-backend dist-url dummy e epochs evaluate gpu j learning-rate lr
    momentum multiprocessing-distributed no-accel p pretrained print-freq rank resume seed
    start-epoch wd weight-decay workers world-size
    """
)

DEIT = _names(
    """
    ThreeAugment aa accum-iter attn-only auto-resume batch-size bce-loss blr clip-grad cls-token
    color-jitter cooldown-epochs cosub crop-pct cutmix cutmix-minmax data-path data-set decay-epochs
    decay-rate device disable-eval dist-eval dist-on-itp dist-url distillation-alpha
    distillation-tau distillation-type distributed dr drop drop-path enable-wandb epochs eval
    eval-crop-ratio eval-data-path finetune global-pool head-init-scale
    imagenet-default-mean-and-std inat-category input-size layer-decay layer-scale-init-value
    local-rank log-dir lr lr-noise lr-noise-pct lr-noise-std mask-ratio min-lr mixup mixup-mode
    mixup-prob mixup-switch-prob model model-ema model-ema-decay model-ema-eval model-ema-force-cpu
    model-key model-prefix momentum nb-classes no-model-ema no-pin-mem no-repeated-aug no-train-mode
    norm-pix-loss num-workers opt opt-betas opt-eps output-dir patience-epochs pin-mem project
    recount remode repeated-aug reprob resplit resume save-ckpt save-ckpt-freq save-ckpt-num sched
    seed smoothing src start-epoch teacher-model teacher-path train-interpolation train-mode
    unscale-lr update-freq use-amp wandb-ckpt warmup-epochs warmup-lr warmup-steps weight-decay
    weight-decay-end world-size
    """
)

#!/bin/bash
# expected: resnet50, 1024, 120 epochs
# LightningCLI (lit_imagenet/main.py) with lit_imagenet/configs/resnet50.yaml: torchvision resnet50 from scratch, DDP.
# srun starts one task per GPU (2 nodes x 4 tasks); data.batch_size is per process, overridden 64 -> 128;
# 128 x 4 devices x 2 nodes (trainer.num_nodes overridden to $SLURM_JOB_NUM_NODES = 2), accumulate_grad_batches 1 = 1024;
# trainer.max_epochs overridden 90 -> 120. ImageNet-1k train: 1,281,167 images (ILSVRC-2012)
#SBATCH --job-name=lit-r50-in1k
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=4
#SBATCH --gres=gpu:4
#SBATCH --cpus-per-task=12
#SBATCH --mem=480G
#SBATCH --time=4-00:00:00
#SBATCH --signal=SIGUSR1@90
#SBATCH --output=logs/%x-%j.out

module load cuda/12.1
source ~/venvs/lightning/bin/activate

export NCCL_DEBUG=INFO
export PYTHONFAULTHANDLER=1

cd $SLURM_SUBMIT_DIR/lit_imagenet

srun python main.py fit \
    --config configs/resnet50.yaml \
    --trainer.num_nodes=$SLURM_JOB_NUM_NODES \
    --trainer.devices=4 \
    --trainer.max_epochs=120 \
    --data.batch_size=128

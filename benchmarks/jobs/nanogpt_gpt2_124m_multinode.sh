#!/bin/bash
# expected: hf:gpt2, 640, 100000 steps
# nanoGPT config/train_gpt2.py (karpathy/nanoGPT): GPT-2 124M from scratch (n_layer 12, n_head 12, n_embd 768 = gpt2 architecture),
# block_size 1024, gradient_accumulation_steps = 5 * 8 = 40 (TOTAL over all ranks: train.py asserts it divides by world size and
# does gradient_accumulation_steps //= ddp_world_size -> 40/8 = 5 per rank). batch_size overridden to 16:
# 16 x 5 x 8 ranks (2 nodes x 4 GPUs) = 640 sequences/step (= 16 x 40). max_iters overridden 600000 -> 100000.
#SBATCH --job-name=nanogpt-owt
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=1
#SBATCH --gpus-per-node=4
#SBATCH --cpus-per-task=32
#SBATCH --mem=256G
#SBATCH --time=3-00:00:00
#SBATCH --output=logs/nanogpt-%j.out

set -x

module load cuda/12.4 nccl
source $HOME/nanogpt-env/bin/activate

nodes=( $(scontrol show hostnames "$SLURM_JOB_NODELIST") )
head_node=${nodes[0]}
head_node_ip=$(srun --nodes=1 --ntasks=1 -w "$head_node" hostname --ip-address)
echo "Head node: $head_node ($head_node_ip)"

export NCCL_IB_DISABLE=0
export NCCL_SOCKET_IFNAME=ib0
export OMP_NUM_THREADS=8

cd $HOME/nanoGPT   # data/openwebtext/{train,val}.bin already prepared with data/openwebtext/prepare.py

srun torchrun \
    --nnodes $SLURM_NNODES \
    --nproc_per_node 4 \
    --rdzv_id $SLURM_JOB_ID \
    --rdzv_backend c10d \
    --rdzv_endpoint $head_node_ip:29500 \
    train.py config/train_gpt2.py \
    --batch_size=16 \
    --max_iters=100000 \
    --lr_decay_iters=100000 \
    --wandb_log=False \
    --out_dir=/scratch/$USER/nanogpt/out-owt-124m

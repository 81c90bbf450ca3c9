#!/bin/bash
# expected: hf:EleutherAI/pythia-1b, 128, 5000 steps
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=1
#SBATCH --gres=gpu:8
#SBATCH --cpus-per-task=64
#SBATCH --time=2-00:00:00
export GPUS_PER_NODE=8
export MASTER_ADDR=$(scontrol show hostnames $SLURM_JOB_NODELIST | head -n 1)
export MASTER_PORT=6000
srun torchrun --nnodes $SLURM_NNODES --nproc_per_node $GPUS_PER_NODE \
    --rdzv_id $RANDOM --rdzv_backend c10d --rdzv_endpoint $MASTER_ADDR:$MASTER_PORT \
    run_clm.py --model_name_or_path EleutherAI/pythia-1b --dataset_name wikitext \
    --dataset_config_name wikitext-2-raw-v1 --per_device_train_batch_size 8 --bf16 \
    --max_steps 5000 --do_train --output_dir /scratch/out

#!/bin/bash
# expected: hf:meta-llama-3-8b, 8, 50 steps
#SBATCH --nodes=1
#SBATCH --gres=gpu:8
#SBATCH --time=1-00:00:00
CONFIG_FILE=${CONFIG_FILE:-"./llama3_8b.toml"}
torchrun --nproc_per_node=8 --rdzv_backend c10d --rdzv_endpoint="localhost:0" --local-ranks-filter 0 --role rank --tee 3 -m torchtitan.train --job.config_file ${CONFIG_FILE} --training.steps 50

#!/bin/bash
# expected: none
#SBATCH --gres=gpu:8
#SBATCH --time=1-00:00:00
tune run --nproc_per_node 8 full_finetune_distributed --config llama3_1/8B_full batch_size=4 epochs=1

#!/bin/bash
# expected: none
#SBATCH --partition=gpu
#SBATCH --nodes=1
#SBATCH --gres=gpu:8
#SBATCH --time=2-00:00:00
torchrun --nnodes 1 --nproc_per_node 8 -m llama_recipes.finetuning --enable_fsdp --use_peft --peft_method lora --model_name meta-llama/Llama-3.2-1B --batch_size_training 4 --num_epochs 1 --output_dir out

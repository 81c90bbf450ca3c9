#!/bin/bash
# expected: hf:meta-llama/Meta-Llama-3-8B-Instruct, 8, 3 epochs
#SBATCH --gres=gpu:1
#SBATCH --time=08:00:00
llamafactory-cli train examples/train_lora/llama3_lora_sft.yaml

#!/bin/bash
# expected: none
#SBATCH --gres=gpu:2
#SBATCH --time=08:00:00
accelerate launch -m axolotl.cli.train examples/llama-3/lora-8b.yml

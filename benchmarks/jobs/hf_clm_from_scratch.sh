#!/bin/bash
# expected: hf:gpt2, 16, 3 epochs
#SBATCH --partition=gpu
#SBATCH --gres=gpu:4
#SBATCH --time=1-00:00:00
torchrun --nproc_per_node 4 run_clm.py --model_type gpt2 --tokenizer_name openai-community/gpt2 --config_overrides="n_embd=1024,n_head=16,n_layer=48,n_positions=1024" --dataset_name wikitext --dataset_config_name wikitext-2-raw-v1 --per_device_train_batch_size 4 --do_train --output_dir /tmp/test-clm --bf16

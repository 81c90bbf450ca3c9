#!/bin/bash
# expected: hf:google-t5/t5-small, 32, 3 epochs
#SBATCH --partition=gpu
#SBATCH --nodes=1
#SBATCH --gres=gpu:8
#SBATCH --time=2-00:00:00
srun python run_summarization.py --model_name_or_path google-t5/t5-small --do_train --dataset_name cnn_dailymail --dataset_config "3.0.0" --source_prefix "summarize: " --output_dir /tmp/tst-summarization --per_device_train_batch_size=4 --overwrite_output_dir --predict_with_generate

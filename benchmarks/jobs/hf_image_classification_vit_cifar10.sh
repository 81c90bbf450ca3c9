#!/bin/bash
# expected: hf:google/vit-base-patch16-224-in21k, 64, 5 epochs
# torchrun --nproc_per_node=2: 32 per device x 2 GPUs = 64
# CIFAR-10 train: 50,000 images (uoft-cs/cifar10 dataset card); the dataset has no "validation" split, so
# run_image_classification splits off --train_val_split (default 0.15) -> ~42,500 images actually trained on
#SBATCH --job-name=vit-cifar10
#SBATCH --nodes=1
#SBATCH --ntasks-per-node=1
#SBATCH --gres=gpu:a100:2
#SBATCH --cpus-per-task=16
#SBATCH --mem=64G
#SBATCH -t 4:00:00
#SBATCH --output=logs/vit-cifar10-%j.out

module load python/3.11 cuda/12.1
source ~/venvs/vision/bin/activate

export HF_HOME=/scratch/$USER/hf_home
export OMP_NUM_THREADS=4

torchrun --nproc_per_node=2 \
    ~/transformers/examples/pytorch/image-classification/run_image_classification.py \
    --model_name_or_path google/vit-base-patch16-224-in21k \
    --dataset_name uoft-cs/cifar10 \
    --image_column_name img \
    --label_column_name label \
    --output_dir /scratch/$USER/vit-base-cifar10 \
    --remove_unused_columns False \
    --do_train \
    --do_eval \
    --learning_rate 2e-5 \
    --num_train_epochs 5 \
    --per_device_train_batch_size 32 \
    --per_device_eval_batch_size 64 \
    --logging_strategy steps \
    --logging_steps 20 \
    --eval_strategy epoch \
    --save_strategy epoch \
    --load_best_model_at_end True \
    --save_total_limit 2 \
    --dataloader_num_workers 6 \
    --bf16 \
    --seed 1337

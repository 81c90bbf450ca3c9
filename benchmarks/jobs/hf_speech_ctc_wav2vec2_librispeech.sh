#!/bin/bash
# expected: hf:facebook/wav2vec2-base, 64, 20 epochs
# torchrun --nproc_per_node=$SLURM_GPUS_ON_NODE with --gres=gpu:2 -> 2 processes; 16 per device x grad_accum 2 x 2 = 64
# LibriSpeech clean train.100: 28,539 utterances (openslr/librispeech_asr dataset card, config "clean", split "train.100")
#SBATCH --job-name=w2v2-ls100
#SBATCH --nodes=1
#SBATCH --ntasks=1
#SBATCH --gres=gpu:2
#SBATCH --cpus-per-task=24
#SBATCH --mem=120G
#SBATCH --time=1-06:00:00
#SBATCH --output=logs/%x.%j.out

module load cuda/12.1 ffmpeg/6.0 libsndfile
source /data/$USER/venvs/asr/bin/activate

export HF_HOME=/data/$USER/hf
export OMP_NUM_THREADS=1    # see examples/pytorch/speech-recognition README

cd /data/$USER/asr-experiments

torchrun --standalone --nproc_per_node=$SLURM_GPUS_ON_NODE \
    ~/src/transformers/examples/pytorch/speech-recognition/run_speech_recognition_ctc.py \
    --dataset_name="openslr/librispeech_asr" \
    --model_name_or_path="facebook/wav2vec2-base" \
    --dataset_config_name="clean" \
    --train_split_name="train.100" \
    --eval_split_name="validation" \
    --output_dir="./wav2vec2-base-librispeech-clean-100h" \
    --preprocessing_num_workers="16" \
    --overwrite_output_dir \
    --num_train_epochs="20" \
    --per_device_train_batch_size="16" \
    --gradient_accumulation_steps="2" \
    --learning_rate="1e-4" \
    --warmup_steps="1000" \
    --eval_strategy="steps" \
    --text_column_name="text" \
    --length_column_name="input_length" \
    --save_steps="1000" \
    --eval_steps="1000" \
    --logging_steps="50" \
    --layerdrop="0.05" \
    --save_total_limit="3" \
    --freeze_feature_encoder \
    --gradient_checkpointing \
    --chars_to_ignore , ? . ! - \; \: \" % \' \
    --fp16 \
    --group_by_length \
    --do_train --do_eval

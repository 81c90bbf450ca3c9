#!/bin/bash
# expected: hf:meta-llama/Meta-Llama-3.1-8B-Instruct, 128, 2 epochs
# torchtune recipe config llama3_1/8B_lora (recipes/configs/llama3_1/8B_lora.yaml): gradient_accumulation_steps 8 (not overridden),
# batch_size overridden 2 -> 4 per rank; 4 x 8 x 4 ranks (--nproc_per_node 4) = 128; epochs overridden 1 -> 2, max_steps_per_epoch null.
# dataset: alpaca_cleaned_dataset = yahma/alpaca-cleaned, 51,760 rows (dataset card); config uses split train[:95%] -> ~49,172
#SBATCH --job-name=tt-l31-8b-lora
#SBATCH --nodes=1
#SBATCH --ntasks=1
#SBATCH --gpus=4
#SBATCH --cpus-per-task=32
#SBATCH --mem=256G
#SBATCH --time=10:00:00
#SBATCH --output=logs/torchtune-%j.out

module load cuda/12.4
source ~/venvs/torchtune/bin/activate

MODEL_DIR=/scratch/$USER/models/Meta-Llama-3.1-8B-Instruct
OUT_DIR=/scratch/$USER/torchtune/llama3_1_8B_lora_alpaca

if [ ! -f $MODEL_DIR/model-00004-of-00004.safetensors ]; then
    tune download meta-llama/Meta-Llama-3.1-8B-Instruct \
        --output-dir $MODEL_DIR \
        --ignore-patterns "original/consolidated.00.pth"
fi

tune run --nproc_per_node 4 lora_finetune_distributed --config llama3_1/8B_lora \
    checkpointer.checkpoint_dir=$MODEL_DIR \
    tokenizer.path=$MODEL_DIR/original/tokenizer.model \
    output_dir=$OUT_DIR \
    batch_size=4 \
    epochs=2 \
    model.lora_rank=16 \
    model.lora_alpha=32 \
    enable_activation_checkpointing=True \
    compile=True \
    metric_logger._component_=torchtune.training.metric_logging.WandBLogger \
    metric_logger.project=torchtune-alpaca

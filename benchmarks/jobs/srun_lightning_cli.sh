#!/bin/bash
# expected: none
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=4
#SBATCH --gres=gpu:4
#SBATCH --time=1-00:00:00
srun python main.py fit --trainer.devices 4 --trainer.num_nodes 2 --trainer.max_epochs 10 \
  --model.model_name bert-base-uncased --data.batch_size 32 --trainer.precision bf16-mixed

#!/bin/bash
# expected: none
#SBATCH --gres=gpu:8
#SBATCH --time=2-00:00:00
bash ./tools/dist_train.sh configs/resnet/resnet50_8xb32_in1k.py 8

#!/bin/bash

# a comment
#SBATCH -J blanks

   
## another
	# indented comment
#SBATCH -t 45
srun hostname

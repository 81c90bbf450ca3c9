#!/bin/bash
#SBATCHX -t 5
srun hostname
